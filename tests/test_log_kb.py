"""The knowledge base as a catalogue: size, sources, families, rule chains, and texts of our own."""

from __future__ import annotations

import random
import re
from importlib import resources
from pathlib import Path

import pytest

from npudiag.logs.triage import load_kb, match_entries, summarise, triage_table
from npudiag.tomlfile import read_toml
from tests.helpers import parse_text


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


def test_rule_chain_names_the_finding_that_came_first_in_cause() -> None:
    # the sequence of a real plog (Ascend/mind-cluster ascend-faultdiag test case): the link error comes first,
    # the socket timeout it causes later; each line is the entry's own example
    by = {e.id: e for e in load_kb()}
    link, sock = by["hccl-link-error"].example, by["hccl-socket-timeout"].example
    s = _findings(link + "\n" + sock)
    by_id = {f["kb_id"]: f for f in s["findings"]}
    assert by_id["hccl-socket-timeout"]["follows_from"] == "hccl-link-error"
    assert by_id["hccl-link-error"]["follows_from"] is None
    # the clean twin: without the link error the timeout follows nothing
    s = _findings(sock)
    assert s["findings"][0]["kb_id"] == "hccl-socket-timeout" and s["findings"][0]["follows_from"] is None


def test_no_blanket_category_chains_the_tiers_still_rank_a_device_fault_first() -> None:
    # a catalogued sync timeout (507047) and a catalogued trap exception (507016): no source says one leads to the
    # other, so neither follows from the other; the device fault is still the root cause by its tier
    s = _findings("rtEventSynchronize failed, error code is 507047\naclrtSynchronizeStream failed, error code is 507016")
    by_id = {f["kb_id"]: f for f in s["findings"]}
    assert by_id["code-507047"]["follows_from"] is None and by_id["code-507047"]["role"] == "symptom"
    assert s["root_cause"]["kb_id"] == "code-507016" and s["root_cause"]["role"] == "device_fault"
    kb = load_kb()
    assert all(not e.leads_to for e in kb if e.id.startswith("code-"))


def test_categories_with_a_chain_are_refused(tmp_path: Path) -> None:
    p = tmp_path / "kb.toml"
    p.write_text('[[category]]\nid = "c"\ntitle = "C"\nrole = "cause"\nmeaning = "m"\nfix = "f"\nleads_to = ["internal"]\n')
    with pytest.raises(ValueError, match="categories take no leads_to"):
        load_kb(p)


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


def _advice_file() -> dict:
    with resources.as_file(resources.files("npudiag.logs") / "code_advice.toml") as p:
        return read_toml(Path(p))


def _facts(text: str) -> str:
    return re.sub(r"(\d)\s+(MB|GB|s)\b", r"\1\2", text).lower()


def _entry_of_code() -> dict:
    by_code: dict = {}
    for e in load_kb():
        for c in e.codes:
            by_code.setdefault(c, e)
    return by_code


def test_every_code_with_the_sources_own_advice_keeps_its_facts() -> None:
    # the import pinned each code's source cause / solution (advice_sha) and listed its facts (terms: APIs,
    # variables, options, sizes, links, key nouns); whatever entry triage uses for the code must carry them all
    rows = [r for r in _catalogue() if r.get("advice_sha")]
    assert len(rows) >= 460  # 221 E/W codes with a suggestion, 244 numeric codes on the aclError page
    by_code = _entry_of_code()
    for r in rows:
        e = by_code[r["code"]]
        text = _facts(" ".join((e.meaning, e.fix, *e.causes, *e.checks)))
        missing = [t for t in r.get("terms", []) if _facts(t) not in text]
        assert not missing, (r["code"], e.id, missing, e.fix)


def test_a_seeded_random_sample_gives_the_sources_own_fix() -> None:
    # the check, repeatable: 25 codes drawn with a fixed seed; each generated entry's fix is the wording
    # written from that code's pinned source text (same sha), named with the commit it was read at
    advice = _advice_file()
    worded = {(c, a["source_sha"]): a for a in advice["advice"] for c in a["codes"]}
    rows = [r for r in _catalogue() if r.get("advice_sha")]
    by_code = _entry_of_code()
    for r in random.Random(20261207).sample(rows, 25):
        e = by_code[r["code"]]
        own = worded[(r["code"], r["advice_sha"])]
        assert re.search(r"@[0-9a-f]{12} ", r["source"]) and r["cann"], r
        if e.id == "code-" + r["code"].lower():
            assert e.general == "" if own.get("fix") else e.general, e.id
            assert e.fix == (own.get("fix") or e.fix) and e.source == r["source"] and e.applies_to.startswith("CANN ")
        else:  # a hand-written entry: its own words, carrying the source's facts (the test above)
            assert e.applies_to


def test_the_five_codes_the_review_found_wrong_now_give_the_sources_fix() -> None:
    by = {e.id: e for e in load_kb()}
    ek = by["code-ek0204"]  # profiling flush: at least 20 MB of storage; delete files or change the flush path
    assert "20 MB" in ek.fix and "flush path" in ek.fix and "npu-smi" not in ek.fix and not ek.general
    q = by["code-207013"]  # the queue is empty: add data before reading
    assert "queue" in q.fix and "before reading" in q.fix and "memory" not in q.fix
    t = by["code-e30008"]  # AI CPU op timeout: GetNext preprocessing / loops / shapes; aclrtSetOpExecuteTimeOut
    assert "aclrtSetOpExecuteTimeOut" in t.fix and "GetNext" in t.meaning + t.fix and not t.general
    port = by["code-ej0002"]  # "The network port is down": the source gives no fix; the communication category's
    assert port.general == "communication" and "environment variable" not in port.fix
    opp = by["code-e10501"]  # IR not registered: ASCEND_OPP_PATH and the op prototype registration
    assert "ASCEND_OPP_PATH" in opp.fix and "prototype" in opp.fix and "dtype" not in opp.fix


def test_every_entry_names_its_source_and_catalogue_sources_are_pinned() -> None:
    for e in load_kb():
        assert e.source, e.id
        if e.id.startswith("code-") and not e.codes[0].startswith("ERR"):
            assert re.match(r"hicann/(runtime|ge)@[0-9a-f]{12} \S+", e.source) and e.applies_to.startswith("CANN "), e.id
        if e.id.startswith("code-err"):
            assert e.source.startswith("Ascend/pytorch@") and e.applies_to.startswith("torch_npu v6.0.rc1"), e.id


def test_triage_table_and_json_carry_source_and_release() -> None:
    s = _findings("EK0204: [PID: 1] 2025-01-01-00:00:00.000.000 Insufficient disk space. Reason: no space left.")
    f = next(f for f in s["findings"] if f["kb_id"] == "code-ek0204")
    assert f["source"].endswith("error_code.json#EK0204") and f["applies_to"].startswith("CANN 9.1.0")
    assert f["advice"] == "from the source"
