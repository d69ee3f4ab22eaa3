"""What a live run went through when its API server did not answer: each outage (from the
first request of the run's watches that failed to the first that was answered again),
when admission resumed after it (the first new reservation the run saw), the watches the
API server refused to resume (410 Gone, as after its restart) and listed again, and the
requests tried again.

The run rides an outage out with the controller's rules (`controller.kube.client`): a
failed write is tried again with `retrying`'s backoff (0.05 s doubling to 2 s) for as long
as the run's timeout allows, a broken watch resumes from its last resourceVersion after
0.5 s doubling to 4 s (the informers' backoff), and an expired one is listed again. What
changed between a watch's last event and such a re-list is seen only as where it ended up
(the list is one consistent snapshot: the quota ledger stays right at it, but an over-use
inside the gap could not be seen)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Outage", "Outages", "render_outages"]


@dataclass
class Outage:
    """Seconds since the run's start."""

    began: float
    ended: float | None = None
    admission_resumed: float | None = None  # the first reservation seen after `ended`

    def to_json(self) -> dict[str, Any]:
        resumed = (
            None
            if self.admission_resumed is None or self.ended is None
            else round(self.admission_resumed - self.ended, 2)
        )
        return {
            "began_s": round(self.began, 2),
            "seconds": None if self.ended is None else round(self.ended - self.began, 2),
            "admission_resumed_after_s": resumed,
        }


@dataclass
class Outages:
    """The run's account of its API server's outages (`now`: the run's clock)."""

    now: Callable[[], float]
    seen: list[Outage] = field(default_factory=list)
    relists: int = 0  # watches listed again after 410 Gone
    retries: int = 0  # requests tried again
    _current: Outage | None = None

    def failed(self) -> None:
        """A request of a watch failed: an outage begins, unless one is on."""
        if self._current is None:
            self._current = Outage(self.now())
            self.seen.append(self._current)

    def answered(self) -> None:
        """A request of a watch was answered: the outage on, if any, is over."""
        if self._current is not None:
            self._current.ended = self.now()
            self._current = None

    async def retried(self, _: BaseException | None = None) -> None:
        """A request is tried again (`retrying`'s `on_retry`)."""
        self.retries += 1

    def admitted(self, t: float) -> None:
        """A Workload newly holds quota at `t`."""
        for outage in self.seen:
            ended = outage.ended
            if ended is not None and outage.admission_resumed is None and t >= ended:
                outage.admission_resumed = t

    def to_json(self) -> dict[str, Any]:
        return {
            "outages": [outage.to_json() for outage in self.seen],
            "watch_relists": self.relists,
            "retries": self.retries,
        }


def render_outages(figures: dict[str, Any] | None) -> list[str]:
    """The report's lines about outages (none when the run saw none)."""
    if not figures or not (figures.get("outages") or figures.get("watch_relists")):
        return []
    outages = figures["outages"]
    lines = [
        f"  API server outages seen by the run: {len(outages)}; watches listed again after "
        f"410 Gone: {figures['watch_relists']}; requests retried: {figures['retries']}"
    ]
    for outage in outages:
        seconds = "not over" if outage["seconds"] is None else f"{outage['seconds']:.1f} s"
        resumed = outage["admission_resumed_after_s"]
        after = "no admission after it" if resumed is None else f"admission resumed {resumed:.1f} s"
        lines.append(f"    at {outage['began_s']:.1f} s: unreachable {seconds}; {after} later")
    return lines
