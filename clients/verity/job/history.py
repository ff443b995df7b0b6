"""What a job's events say that its on-chain records no longer do: which tasks it has, every node
ever drawn into each replica slot (a slot drawn again overwrites its record), what each was fined
(late: `ReplicaLate`; a lost dispute: `StakeSlashed` in the resolving transaction) and how each
dispute went (v2: a task may have several disputes, one per challenge). Fed events in chain order;
feeding is idempotent per event."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from verity.chain.protocol import DisputeOutcome, ReplicaStatus, read_decline_note


@dataclass
class ReplicaRow:
    slot: int
    node: str
    status: str          # the replica status; "replaced" for a former holder drawn out for another reason
    deadline: int = 0    # commit/submit/reveal deadline (unix s), 0 = none
    fined: int = 0       # wei burned or slashed from this holder on this task
    current: bool = True
    note: str = ""       # a decliner's own note from its ReplicaDeclined event (`time 181/116 s`)


class JobHistory:
    def __init__(self, job_id: int, game_address: str):
        self.job_id, self.game = job_id, game_address
        self.tasks: dict[int, tuple[int, int]] = {}                       # task id -> (round, index)
        self._disputes: dict[int, dict[int, str]] = defaultdict(dict)     # task id -> {dispute id: "step 14"}
        self._dispute_task: dict[int, int] = {}                           # dispute id -> task id
        self._assigned: dict[int, list[tuple[int, str]]] = defaultdict(list)  # task id -> [(slot, node)]
        self._fines: dict[tuple[int, str], int] = defaultdict(int)        # (task, node) -> wei
        self._marks: dict[tuple[int, str], str] = {}                      # (task, node) -> late / slashed / declined
        self._notes: dict[tuple[int, str], str] = {}                      # (task, node) -> the decliner's note
        self._slashes: dict[str, list] = defaultdict(list)                # tx -> [(node, amount)]
        self._resolved: dict[str, int] = {}                               # tx -> task id

    def feed(self, events) -> None:
        for ev in events:
            self._feed(ev)
        for tx, tid in self._resolved.items():  # dispute slashes: StakeSlashed of a replica in the resolving tx
            holders = {n for _, n in self._assigned[tid]}
            for node, amount in self._slashes.pop(tx, []):
                if node in holders:
                    self._fines[(tid, node)] += amount
                    self._marks[(tid, node)] = "slashed"

    def _feed(self, ev) -> None:
        a, tid = ev.args, ev.args.get("taskId")
        if ev.name == "TaskCreated" and a["jobId"] == self.job_id:
            self.tasks[tid] = (int(a["round"]), int(a["index"]))
        elif ev.name == "StakeSlashed" and a["to"] == self.game:  # a dispute party's (or silent referee's) stake
            self._slashes[ev.tx_hash].append((a["node"], a["amount"]))
        elif ev.name == "StepPinpointed" and a["disputeId"] in self._dispute_task:
            self._disputes[self._dispute_task[a["disputeId"]]][a["disputeId"]] = f"step {a['step']}"
        elif tid not in self.tasks:
            return
        elif ev.name == "TaskAssigned":
            self._assigned[tid].append((int(a["slot"]), a["node"]))
        elif ev.name == "ReplicaLate":
            self._fines[(tid, a["node"])] += a["slashed"]
            self._marks[(tid, a["node"])] = "late"
        elif ev.name == "ReplicaDeclined":
            self._marks[(tid, a["node"])] = "declined"
            self._notes[(tid, a["node"])] = read_decline_note(a.get("reason", b""))
        elif ev.name == "DisputeOpened":
            self._disputes[tid].setdefault(a["disputeId"], "open")
            self._dispute_task[a["disputeId"]] = tid
        elif ev.name == "DisputeAbandoned":  # stale: the task's candidate changed while it ran
            self._disputes[tid][a["disputeId"]] = "abandoned (stale)"
        elif ev.name == "DisputeResolved":
            outcome = DisputeOutcome(a["outcome"]).name.lower().replace("_", " ")
            self._disputes[tid][a["disputeId"]] = outcome
            self._resolved[ev.tx_hash] = tid

    @property
    def disputes(self) -> dict[int, str]:
        """task id -> its disputes, e.g. "#2 challenger wins, #3 step 14"."""
        return {tid: self.dispute_text(tid) for tid, d in self._disputes.items() if d}

    def dispute_text(self, tid: int) -> str:
        return ", ".join(f"#{did} {state}" for did, state in sorted(self._disputes.get(tid, {}).items()))

    def replicas(self, tid: int, current: list) -> list[ReplicaRow]:
        """Rows for the task's current replica records (`getReplicas`), each slot preceded by its
        former holders."""
        rows: list[ReplicaRow] = []
        for slot, r in enumerate(current):
            held = [n for s, n in self._assigned[tid] if s == slot]
            if held and held[-1] == r.node:
                held = held[:-1]
            for node in held:
                rows.append(ReplicaRow(slot, node, self._marks.get((tid, node), "replaced"),
                                       fined=self._fines.get((tid, node), 0), current=False,
                                       note=self._notes.get((tid, node), "")))
            status = ReplicaStatus(r.status).name.lower()
            fined = self._fines.get((tid, r.node), 0) if status in ("late", "slashed") else 0
            declined = status == "voided" and self._marks.get((tid, r.node)) == "declined"
            rows.append(ReplicaRow(slot, r.node, "declined" if declined else status, int(r.deadline), fined,
                                   note=self._notes.get((tid, r.node), "") if declined else ""))
        return rows

    def declines(self, tid: int) -> dict[str, str]:
        """node -> its note, for every node that declined task `tid`."""
        return {node: self._notes[(t, node)] for (t, node), mark in self._marks.items() if t == tid and mark == "declined"}
