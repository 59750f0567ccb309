"""Each test's outcome and the run's: the summary line and the JUnit XML for CI."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import field

from flowc.fast_dataclass import dataclass


@dataclass(frozen=True, slots=True)
class TestOutcome:
    file: str
    name: str
    seconds: float
    failure: str | None = None
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.failure is None and self.error is None


@dataclass(slots=True)
class TestRun:
    outcomes: list[TestOutcome] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outcomes)

    def summary(self) -> str:
        failed = sum(1 for o in self.outcomes if not o.passed)
        return f"{len(self.outcomes) - failed} passed, {failed} failed"

    def junit_xml(self) -> str:
        """JUnit XML for CI: one testcase per test, a failure's message its diff."""
        suite = ET.Element(
            "testsuite",
            name="flowc test",
            tests=str(len(self.outcomes)),
            failures=str(sum(1 for o in self.outcomes if o.failure is not None)),
            errors=str(sum(1 for o in self.outcomes if o.error is not None)),
            time=f"{sum(o.seconds for o in self.outcomes):.3f}",
        )
        for outcome in self.outcomes:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=outcome.file,
                name=outcome.name,
                time=f"{outcome.seconds:.3f}",
            )
            if outcome.failure is not None:
                ET.SubElement(case, "failure", message="rows differ").text = outcome.failure
            if outcome.error is not None:
                ET.SubElement(case, "error", message="the job failed").text = outcome.error
        return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
