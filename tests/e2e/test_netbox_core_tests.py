"""tools/netbox_core_tests.py fails a run only for NetBox tests that fail with hvsync and pass without it.

The outputs below are Django's test runner's, as NetBox 4.7.3 printed them for its virtualization
filterset tests with the hvsync of before issue 39 (a reverse `hvsync_state` relation on its models).
"""

from __future__ import annotations

HEAD = "Found 99 test(s).\nSystem check identified no issues (0 silenced).\n"
MISSING_FILTER = """======================================================================
FAIL: test_missing_filters (virtualization.tests.test_filtersets.{cls}.test_missing_filters)
----------------------------------------------------------------------
Traceback (most recent call last):
AssertionError: 'hvsync_state_id' not found in odict_keys([...]) : No filter defined for hvsync_state_id (hvsync_state)!

"""
CLASS_ERROR = """======================================================================
ERROR: setUpClass (virtualization.tests.test_views.ClusterTestCase)
----------------------------------------------------------------------
django.db.utils.OperationalError: ...

"""


def run(body: str, failed: int, errors: int = 0) -> str:
    if not failed and not errors:
        return f"{HEAD}{'.' * 99}\n{'-' * 70}\nRan 99 tests in 15.278s\n\nOK\n"
    counts = ", ".join(
        part
        for part in (f"failures={failed}" if failed else "", f"errors={errors}" if errors else "")
        if part
    )
    return f"{HEAD}{body}{'-' * 70}\nRan 99 tests in 19.900s\n\nFAILED ({counts})\n"


def test_failures_reads_each_failed_or_errored_test() -> None:
    import netbox_core_tests as tool

    out = run(MISSING_FILTER.format(cls="VirtualMachineTestCase") + CLASS_ERROR, failed=1, errors=1)
    assert tool.failures(out) == {
        "virtualization.tests.test_filtersets.VirtualMachineTestCase.test_missing_filters",
        "virtualization.tests.test_views.ClusterTestCase.setUpClass",
    }


def test_a_failure_only_with_hvsync_fails_the_run() -> None:
    import netbox_core_tests as tool

    broken = "".join(MISSING_FILTER.format(cls=c) for c in ("VirtualMachineTestCase", "VirtualDiskTestCase"))
    ok, report = tool.verdict({"hvsync": (1, run(broken, failed=2)), "core": (0, run("", failed=0))})
    assert not ok
    assert [line for line in report if "ONLY WITH HVSYNC" in line] == [
        "  FAILS ONLY WITH HVSYNC: virtualization.tests.test_filtersets.VirtualDiskTestCase.test_missing_filters",
        "  FAILS ONLY WITH HVSYNC: virtualization.tests.test_filtersets.VirtualMachineTestCase.test_missing_filters",
    ]
    assert report[-1] == "NetBox's own tests: hvsync breaks NetBox's own tests"


def test_a_failure_without_hvsync_too_is_reported_and_not_counted() -> None:
    import netbox_core_tests as tool

    same = MISSING_FILTER.format(cls="VirtualMachineTestCase")
    ok, report = tool.verdict({"hvsync": (1, run(same, failed=1)), "core": (1, run(same, failed=1))})
    assert ok
    assert (
        "  fails without hvsync too (not counted): "
        + ("virtualization.tests.test_filtersets.VirtualMachineTestCase.test_missing_filters")
        in report
    )
    assert report[-1] == "NetBox's own tests: as green with hvsync as without"


def test_a_run_that_broke_before_its_tests_fails_the_run() -> None:
    import netbox_core_tests as tool

    crashed = "Traceback (most recent call last):\nModuleNotFoundError: No module named 'netbox_hvsync'\n"
    ok, report = tool.verdict({"hvsync": (1, crashed), "core": (0, run("", failed=0))})
    assert not ok
    assert report[0].endswith("with hvsync: no test ran, exit 1, 0 failed")
