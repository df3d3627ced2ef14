"""The local journal of a remote ledger: what is written is read back exactly, and a
journal file holding anything at all (the user's own data dir: edited, truncated, hostile)
never stops the server nor brings a figure the ledger may not hold."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from tempfile import TemporaryDirectory

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_gpucost.server.ledger import GpuMinuteSums, Pending
from jupyter_gpucost.server.ledger.journal import MAX_FIGURE, Journal, JournalEntry

LOG = logging.getLogger("test")


def test_a_journal_is_read_back_as_it_was_written(tmp_path: Path) -> None:
    p = Pending(cost_micro=1234, idle_micro=34, energy_j=5.5, last_unix_s=1e9 + 0.5)
    p.spend[60_000_000] = [1234, 34, 6_880_000]
    p.gpus[(0, 60_000_000)] = GpuMinuteSums(97.0, 391.5, 3, 2**30)
    started = datetime(2026, 11, 29, 14, 0, tzinfo=UTC)
    journal = Journal(tmp_path / "journal", LOG)
    assert journal.save(JournalEntry("2026-11-29T14:00:00Z-abc123", started, "alice", [p]))
    (entry,) = journal.load_all()
    assert entry.session_id == "2026-11-29T14:00:00Z-abc123"
    assert (entry.started, entry.user, entry.ended) == (started, "alice", None)
    assert entry.parts == [p]
    journal.remove(entry.session_id)
    assert journal.load_all() == []


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=6)
    ),
    max_leaves=30,
)


def _shaped(parts: object) -> dict[str, object]:
    return {
        "version": 1,
        "session_id": "s",
        "started": "2026-11-29T14:00:00+00:00",
        "user": None,
        "ended": None,
        "parts": parts,
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        json_values,
        json_values.map(_shaped),
        st.lists(json_values, max_size=3).map(_shaped),
    )
)
def test_any_journal_file_is_read_or_left_never_raising(doc: object) -> None:
    with TemporaryDirectory() as folder:
        path = Path(folder) / "x.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        for entry in Journal(Path(folder), LOG).load_all():
            for p in entry.parts:
                figures = [p.cost_micro, p.idle_micro, *p.spend]
                figures += [v for row in p.spend.values() for v in row]
                assert all(0 <= v <= MAX_FIGURE for v in figures)
