"""The CANN dump file format (adump / ACL data dump) and its DumpData protobuf."""
