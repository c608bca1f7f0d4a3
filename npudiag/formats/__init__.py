"""One reader per real file format. Each returns Arrow tables conforming to npudiag.schemas.

Readers never print; problems that do not make a file unusable come back as warning strings, and
unusable input raises :class:`npudiag.errors.InputError`.
"""
