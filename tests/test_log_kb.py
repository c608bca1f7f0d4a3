"""The knowledge base as a catalogue: size, sources, families, rule chains, and texts of our own."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest

from npudiag.logs.formats.ascend_log import parse_text
from npudiag.logs.triage import load_kb, match_entries, summarise, triage_table
from npudiag.tomlfile import read_toml


def _catalogue() -> list[dict]:
    with resources.as_file(resources.files("npudiag.logs") / "error_catalogue.toml") as p:
        return read_toml(Path(p))["code"]


def test_at_least_400_entries_each_with_a_public_source() -> None:
    kb = load_kb()
    assert len(kb) >= 400 and len({e.id for e in kb}) == len(kb)
    assert [e.id for e in kb if not e.source] == []
    public = r"hicann/|github|GitHub|hiascend|mind-cluster|oam-tools|CANN|HCCL|msnpureport|MindSpore|Ascend"
    assert all(re.search(public, e.source) for e in kb)


def test_every_catalogued_code_is_recognised_in_its_printed_form() -> None:
    rows = _catalogue()
    kb = load_kb()
    # each family of the catalogue is there, complete
    families = {r["code"][:2] if not r["code"].isdigit() else r["code"][0] + "xxxxx" for r in rows}
    for fam in ("1xxxxx", "2xxxxx", "3xxxxx", "5xxxxx", "EE", "EI", "EZ", "EH", "EL", "EJ", "EK", "EP", "E1", "E2", "E3", "E4", "E5",
                "E6", "E7", "E8", "E9", "W1"):  # fmt: skip
        assert fam in families, fam
    lines = []
    for r in rows:  # the line each code is printed in: "E10001: <message>" / "... error code is 107000"
        code = r["code"]
        lines.append(f"RuntimeError: call failed, error code is {code}" if code.isdigit() else f"{code}: {r.get('message', '')}")
    events = parse_text("\n\n".join(lines))
    found = {c for lst in events["error_codes"].to_pylist() for c in lst}
    assert {r["code"] for r in rows} <= found
    hits = match_entries(events, kb)
    matched_codes = set()
    for mask in hits.values():
        for lst in events.filter(mask)["error_codes"].to_pylist():
            matched_codes.update(lst)
    assert {r["code"] for r in rows} - matched_codes == set()


def test_texts_are_our_own_not_the_catalogue_messages() -> None:
    messages = {" ".join(r["message"].split()).lower() for r in _catalogue() if len(r.get("message", "")) >= 30}
    for e in load_kb():
        for text in (e.meaning, e.fix, *e.checks, *e.causes):
            low = text.lower()
            assert not any(m in low for m in messages), (e.id, text)


def _findings(text: str) -> dict:
    kb = load_kb()
    events = parse_text(text)
    return summarise(events, triage_table(events, kb), kb)


def test_rule_chain_names_the_code_that_came_first_in_cause() -> None:
    # the allocation failure surfaces first through torch_npu, the driver says why a moment later
    acl = "RuntimeError: NPU function error: aclrtMalloc(&ptr, size, ACL_MEM_MALLOC_HUGE_FIRST), error code is 207018"
    drv = "EL0019: 2024-05-21-11:57:54.167.645 Insufficient device memory."
    s = _findings(acl + "\n" + drv)
    by_id = {f["kb_id"]: f for f in s["findings"]}
    assert by_id["acl-device-memory-exhausted"]["follows_from"] == "driver-insufficient-device-memory"
    assert by_id["driver-insufficient-device-memory"]["follows_from"] is None
    assert s["root_cause"]["kb_id"] == "driver-insufficient-device-memory"
    # the clean twin: without the driver's line the allocation failure is the root cause, following nothing
    s = _findings(acl)
    assert s["root_cause"]["kb_id"] == "acl-device-memory-exhausted" and s["findings"][0]["follows_from"] is None


def test_category_chain_puts_a_device_fault_before_the_catalogue_symptoms() -> None:
    # a catalogued sync timeout (507047, no hand-written entry) follows from a catalogued trap exception (507016)
    s = _findings("rtEventSynchronize failed, error code is 507047\naclrtSynchronizeStream failed, error code is 507016")
    by_id = {f["kb_id"]: f for f in s["findings"]}
    assert by_id["code-507047"]["follows_from"] == "code-507016" and by_id["code-507047"]["role"] == "symptom"
    assert s["root_cause"]["kb_id"] == "code-507016" and s["root_cause"]["role"] == "device_fault"


def test_a_chain_naming_nothing_known_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "kb.toml"
    p.write_text(
        '[[entry]]\nid = "a"\ntitle = "A"\ncodes = ["EZ0001"]\nleads_to = ["nope"]\nmeaning = "m"\nfix = "f"\nexample = "EZ0001: x"\n'
    )
    with pytest.raises(ValueError, match="leads_to names nothing known: nope"):
        load_kb(p)


def test_catalogue_entries_name_component_and_code() -> None:
    by_id = {e.id: e for e in load_kb()}
    e = by_id["code-e10001"]
    assert e.title.startswith("GE E10001:") and e.codes == ("E10001",) and e.role == "cause"
    n = by_id["code-507016"]
    assert n.title.startswith("ACL_ERROR_RT_AICORE_TRAP_EXCEPTION (507016)") and n.role == "device_fault"
