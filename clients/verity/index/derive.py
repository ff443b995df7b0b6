"""The job, task and dispute an event belongs to, derived when it is stored: `jobId` / `taskId` / `disputeId` from its
own arguments, a task's job from its TaskCreated, a dispute's task from its DisputeOpened. A StakeSlashed names no
id: it belongs to the job whose DisputeResolved shares its transaction (`queries.job_events`, `stake_slashes_of`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from verity.chain.events import DecodedEvent


@dataclass
class Ids:
    job_id: Optional[int]
    task_id: Optional[int]
    dispute_id: Optional[int]


def _int(value) -> Optional[int]:
    return None if value is None else int(value)


class Deriver:
    """Maps events to their ids. `task_job(task)` / `dispute_task(dispute)` look up what earlier batches stored;
    what this deriver saw itself (`new_tasks`, `new_disputes`) is looked up first and written with the batch."""

    def __init__(self, task_job: Callable[[int], Optional[int]], dispute_task: Callable[[int], Optional[int]]):
        self._task_job, self._dispute_task = task_job, dispute_task
        self.new_tasks: dict[int, int] = {}        # task id -> job id
        self.new_disputes: dict[int, int] = {}     # dispute id -> task id
        self.blocks: dict[tuple[str, int], int] = {}  # ("task"|"dispute", id) -> block of its creating event

    def task_job(self, task_id: int) -> Optional[int]:
        return self.new_tasks[task_id] if task_id in self.new_tasks else self._task_job(task_id)

    def dispute_task(self, dispute_id: int) -> Optional[int]:
        return self.new_disputes[dispute_id] if dispute_id in self.new_disputes else self._dispute_task(dispute_id)

    def ids(self, ev: DecodedEvent) -> Ids:
        a = ev.args
        job, task, dispute = _int(a.get("jobId")), _int(a.get("taskId")), _int(a.get("disputeId"))
        if ev.name == "TaskCreated" and task is not None and job is not None:
            self.new_tasks[task] = job
            self.blocks[("task", task)] = ev.block
        if ev.name == "DisputeOpened" and task is not None and dispute is not None:
            self.new_disputes[dispute] = task
            self.blocks[("dispute", dispute)] = ev.block
        if task is None and dispute is not None:
            task = self.dispute_task(dispute)
        if job is None and task is not None:
            job = self.task_job(task)
        return Ids(job, task, dispute)
