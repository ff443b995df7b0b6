"""The seeded mutants of scripts/mutants.py: one exact-text edit each, and the tests that must catch it.

A fixed list, applied in this order; nothing is random. Each `old` text occurs exactly once in its file (the runner
checks it before anything runs), and each `new` text still compiles: a mutant is a plausible bug, not a syntax
error. Targets are the fastest tests that should fail: one forge test contract (never tests/forge/invariant), or
pytest unit tests; no tests/nodes scenario that starts node processes.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Forge:
    """`forge test --match-path <path>` (optionally one test and fewer fuzz runs)."""
    path: str
    test: str | None = None
    fuzz_runs: int | None = None

    def args(self) -> list[str]:
        out = ["--match-path", self.path]
        if self.test:
            out += ["--match-test", self.test]
        if self.fuzz_runs:
            out += ["--fuzz-runs", str(self.fuzz_runs)]
        return out


@dataclass(frozen=True)
class Pytest:
    """`pytest <ids…> [-k expr]`."""
    ids: tuple[str, ...]
    k: str | None = None

    def args(self) -> list[str]:
        return [*self.ids, *(["-k", self.k] if self.k else [])]


@dataclass(frozen=True)
class Mutant:
    id: str
    description: str
    file: str
    old: str
    new: str
    target: Forge | Pytest


def pytest(*ids: str, k: str | None = None) -> Pytest:
    return Pytest(tuple(ids), k)


STORAGE_UNIT = "tests/storage/test_storage_unit.py"
NODE_V2 = "tests/nodes/test_node_v2_units.py"

CONTRACTS = [
    Mutant(
        "c-bisect-flip", "bisection: an agreeing midpoint leaf moves hi instead of lo (flipped comparison)",
        "contracts/DisputeGame.sol",
        "        if (leafA == leafB) {\n            d.lo = d.mid;",
        "        if (leafA != leafB) {\n            d.lo = d.mid;",
        Forge("tests/forge/DisputeGame.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-no-slash-defender", "a losing defender is not slashed (dropped slash)",
        "contracts/DisputeGame.sol",
        "            if (liable & 1 != 0) pot += _slash(d.sides[1].party, d.taskStake);\n",
        "",
        Forge("tests/forge/DisputeGame.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-skip-dispute-proof", "DisputeGame._checkProof accepts any Merkle proof (skipped check)",
        "contracts/DisputeGame.sol",
        "        if (!Merkle.verify(root, index, leafHash, proof)) {",
        "        if (false && !Merkle.verify(root, index, leafHash, proof)) {",
        Forge("tests/forge/DisputeGame.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-merkle-sibling-order", "Merkle.verify hashes every sibling on the right, whatever the index's bits say",
        "contracts/lib/Merkle.sol",
        "acc = (idx & 1) == 0 ? node(acc, siblingsProof[i]) : node(siblingsProof[i], acc);",
        "acc = node(acc, siblingsProof[i]);",
        Forge("tests/forge/Merkle.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-reputation-bought", "every accepted task counts toward reputation, credited or not (issue 23, item 5)",
        "contracts/NodeRegistry.sol",
        "        if (credited) ++n.tasksCompleted;",
        "        ++n.tasksCompleted;",
        Forge("tests/forge/Reputation.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-reputation-open-class-ignored", "a draw counts as open whatever share of the weight its classes hold",
        "contracts/JobRegistry.sol",
        "                credited = eligibleBps >= OPEN_CLASS_BPS && job.paysCredit && node != job.submitter;",
        "                credited = job.paysCredit && node != job.submitter;",
        Forge("tests/forge/Reputation.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-status-table-bypassed", "a task or replica status moves without its transition table's check (issue 23)",
        "contracts/JobRegistryBase.sol",
        "        if (!StatusTable.allows(table, from, to)) revert",
        "        if (false && !StatusTable.allows(table, from, to)) revert",
        Forge("tests/forge/StatusTable.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-escrow-pay-owner", "JobEscrow.pay sends the payment to the escrow's owner, not the payee (wrong party)",
        "contracts/JobEscrow.sol",
        "        emit PaymentSent(jobId, to, amount);\n        token.safeTransfer(to, amount);",
        "        emit PaymentSent(jobId, to, amount);\n        token.safeTransfer(owner(), amount);",
        Forge("tests/forge/JobEscrow.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-settle-pay-submitter", "an accepted task's payment goes to the job's submitter, not the node (wrong party)",
        "contracts/TaskMachine.sol",
        "            escrow.pay(jobId, node, job.paymentPerTask);",
        "            escrow.pay(jobId, job.submitter, job.paymentPerTask);",
        Forge("tests/forge/JobLifecycle.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-draw-ignores-eligibility", "a sampled node is returned without the eligibility check (liveness, free stake)",
        "contracts/NodeRegistry.sol",
        "                if (_eligible(candidate, req) && !_listed(candidate, exclude)) return (candidate, eligible);",
        "                if (true) return (candidate, eligible);",
        Forge("tests/forge/Selection.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-draw-reads-live-weights", "a draw reads the live trees, not the trees as the epoch began (re-grinding, issue 23)",
        "contracts/NodeRegistry.sol",
        "        st.at = _stamp();",
        "        st.at = 0;",
        Forge("tests/forge/FixedDraws.t.sol"),
    ),
    Mutant(
        "c-randomness-readable-past-epoch", "a value stays readable after its target's epoch (draws then read later weights)",
        "contracts/BlockhashRandomness.sol",
        "        return block.number > target && block.number / SELECTION_EPOCH_BLOCKS == target / SELECTION_EPOCH_BLOCKS;",
        "        return block.number > target && block.number - target <= HASH_WINDOW;",
        Forge("tests/forge/Randomness.t.sol"),
    ),
    Mutant(
        "c-draw-takes-fresh-slot", "a slot taken this epoch is drawn (a node moved into a leaver's slot inherits its weight)",
        "contracts/NodeRegistry.sol",
        "            if (slot <= nodeList.length && _slotSince[slot] != st.at) {",
        "            if (slot <= nodeList.length) {",
        Forge("tests/forge/FixedDraws.t.sol"),
    ),
    Mutant(
        "c-windows-ignore-block-time", "the minimum windows are seconds only (a 30-s window on a 12-s chain: no decline lands)",
        "contracts/JobRegistryBase.sol",
        "        uint64 b = blockSeconds;",
        "        uint64 b = 1;",
        Forge("tests/forge/ChainWindows.t.sol"),
    ),
    Mutant(
        "c-challenge-window-unbounded", "a job may post a 1-second challenge window (results final before a challenge lands)",
        "contracts/JobRegistry.sol",
        '        _checkWindow("challengeWindow", p.challengeWindow, challenge);',
        '        _checkWindow("challengeWindow", p.challengeWindow, 0);',
        Forge("tests/forge/ChainWindows.t.sol"),
    ),
    Mutant(
        "c-task-stake-any", "a job may ask a 1-wei task stake (self-disputes seat referees for free)",
        "contracts/JobRegistry.sol",
        "        if (p.stakePerReplica < MIN_TASK_STAKE) revert",
        "        if (p.stakePerReplica == 0) revert",
        Forge("tests/forge/JobRegistry.t.sol"),
    ),
    Mutant(
        "c-decline-bets-nothing", "an invalid-inputs refusal bets nothing (sybil refusers lose nothing when the task completes)",
        "contracts/TaskMachine.sol",
        "        bool bets = invalidInputs && _invalidDecliners[taskId].length < FAIL_DECLINES;",
        "        bool bets = false;",
        Forge("tests/forge/PosterBond.t.sol"),
    ),
    Mutant(
        "c-clock-allowance-any", "the owner may set a 1-second clock allowance (no party can land a move in it)",
        "contracts/DisputeGame.sol",
        "    uint64 internal constant MIN_CLOCK_ALLOWANCE = 30;",
        "    uint64 internal constant MIN_CLOCK_ALLOWANCE = 1;",
        Forge("tests/forge/DisputeGame.t.sol"),
    ),
    Mutant(
        "c-weight-counts-locked", "a lock leaves the weight alone (busy heavy identities soak up every draw attempt)",
        "contracts/NodeRegistry.sol",
        "        if (NodeMath.weightBase(bonded, free - amount) != NodeMath.weightBase(bonded, free)) _syncWeight(node);",
        "",
        Forge("tests/forge/BusyDraws.t.sol"),
    ),
    Mutant(
        "c-fee-slots-first-come", "a full task's fee slots refuse every later claim (the fastest claimants, a solver's own "
        "verifiers, keep them)",
        "contracts/VerificationFees.sol",
        "        if (ticket >= slots[worst].ticket) revert ChecksExhausted(taskId, pot.checksPerTask);",
        "        revert ChecksExhausted(taskId, pot.checksPerTask);",
        Forge("tests/forge/VerificationFees.t.sol"),
    ),
    Mutant(
        "c-challenges-unbounded", "one challenger may hold any number of open challenges against one claim (a panel "
        "after panel from one identity)",
        "contracts/DisputeGame.sol",
        "        if (open != 0 && _disputes[open].epoch == claim.epoch) revert",
        "        if (false) revert",
        Forge("tests/forge/PanelCosts.t.sol"),
    ),
    Mutant(
        "c-panel-fee-not-charged", "a challenger that did not lose gets its whole bond back: a panel without a "
        "majority (or a stale one) works for nothing",
        "contracts/DisputeGame.sol",
        "                judged && toReferees < d.fee && panel.revealedCount(disputeId) > 0 ? d.fee - toReferees : 0;",
        "                0;",
        Forge("tests/forge/PanelCosts.t.sol"),
    ),
    Mutant(
        "c-panel-fee-without-reveals", "a panel nobody revealed in (every seat a no-show) still takes the panel fee "
        "from an honest challenger's bond, to be burned",
        "contracts/DisputeGame.sol",
        "judged && toReferees < d.fee && panel.revealedCount(disputeId) > 0 ? d.fee - toReferees : 0;",
        "judged && toReferees < d.fee ? d.fee - toReferees : 0;",
        Forge("tests/forge/DisputeGame.t.sol"),
    ),
    Mutant(
        "c-check-after-floor", "a fee check may land once a slot passed its result floor (a copier front-runs a pending "
        "result read from the mempool)",
        "contracts/VerificationFees.sol",
        "                if (block.timestamp >= notBefore) revert CheckTooLate(taskId, notBefore);",
        "",
        Forge("tests/forge/VerificationFees.t.sol"),
    ),
    Mutant(
        "c-clock-blocks-ignored", "the clock allowance ignores the chain's block time (30 s: 2.5 blocks of a 12-s chain)",
        "contracts/DisputeGame.sol",
        "    uint64 internal constant MIN_CLOCK_BLOCKS = 5;",
        "    uint64 internal constant MIN_CLOCK_BLOCKS = 0;",
        Forge("tests/forge/ChainWindows.t.sol"),
    ),
    Mutant(
        "c-result-floor-ignored", "a result may leave its slot at once (a fabricator submits before any fee check lands)",
        "contracts/TaskMachine.sol",
        "        if (block.timestamp < notBefore) revert ResultTooEarly(taskId, slot, notBefore);",
        "",
        Forge("tests/forge/ResultFloor.t.sol"),
    ),
    Mutant(
        "c-draw-any-device", "a CUDA job's draw reads the any-device trees (CPU nodes drawn for CUDA work)",
        "contracts/NodeRegistry.sol",
        "uint256 base = NodeMath.classKey(req.role, req.region, bit, req.deviceClass == DEVICE_CUDA, 0);",
        "uint256 base = NodeMath.classKey(req.role, req.region, bit, false, 0);",
        Forge("tests/forge/EligibleDraws.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-reveal-commitment-unchecked", "a replica's reveal is not checked against its commitment (commit-reveal)",
        "contracts/TaskMachine.sol",
        "        if (commitment != r.commitOrRoot) revert CommitmentMismatch(taskId, r.commitOrRoot, commitment);\n",
        "",
        Forge("tests/forge/JobRegistry.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-challenge-same-block", "a challenge may be revealed in its commitment's block (P6 commit-reveal)",
        "contracts/DisputeGame.sol",
        "if (s.blockNumber >= block.number) revert ChallengeCommitTooRecent",
        "if (s.blockNumber > block.number) revert ChallengeCommitTooRecent",
        Forge("tests/forge/OptimisticDispute.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-settlement-burn", "Settlement.split burns the referees' share too (tokens not conserved)",
        "contracts/lib/Settlement.sol",
        "toBurn = pot - toWinner - toReferees;",
        "toBurn = pot - toWinner;",
        Forge("tests/forge/Settlement.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-finalize-skips-grace", "finalize waits only for the challenge deadline, not the reveal grace (P1 window)",
        "contracts/TaskMachine.sol",
        "        if (block.timestamp <= end) revert ChallengeWindowOpen(taskId, end);\n        if (t.candidate",
        "        if (block.timestamp <= t.challengeDeadline) revert ChallengeWindowOpen(taskId, end);\n"
        "        if (t.candidate",
        Forge("tests/forge/JobRegistry.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-referee-majority", "a referee vote held by half the seats (not more) is a majority (vote counting)",
        "contracts/RefereePanel.sol",
        "if (count > size / 2) return (value, true);",
        "if (count >= size / 2) return (value, true);",
        Forge("tests/forge/RefereePanel.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-sign-off-stays-live", "a node that signs itself off keeps its liveness (drawn, and fined, while away)",
        "contracts/NodeRegistry.sol",
        "if (node == msg.sender) n.lastSeen = 0;",
        "if (node == msg.sender) n.lastSeen = n.lastSeen;",
        Forge("tests/forge/EligibleDraws.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-accepted-work-signs-back-on", "a signed-off node's accepted work makes it live again while it is away",
        "contracts/NodeRegistry.sol",
        "if (n.lastSeen != 0) n.lastSeen = uint64(block.timestamp);",
        "n.lastSeen = uint64(block.timestamp);",
        Forge("tests/forge/EligibleDraws.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-panel-commit-window-fixed", "a seated referee gets the rules' 60 s to commit, not the disputed task's "
        "execution window (issue 25: honest referees on a loaded host fined as no-shows)",
        "contracts/RefereePanel.sol",
        "(window > floor ? window : floor)",
        "floor",
        Forge("tests/forge/RefereePanel.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-dispute-clock-fixed", "a dispute's parties get the deployment's 120-s clock whatever the task's execution "
        "window (issue 25: honest challengers on a loaded host slashed on time)",
        "contracts/DisputeGame.sol",
        "d.allowance = uint32(work > clockAllowance ? work : clockAllowance);",
        "d.allowance = uint32(clockAllowance);",
        Forge("tests/forge/DisputeClocks.t.sol"),
    ),
    Mutant(
        "c-dispute-clock-uncapped", "a task's execution window buys its dispute's parties any clock (a silent party "
        "holds a dispute for days)",
        "contracts/DisputeGame.sol",
        "uint64 work = c.executionWindow < WORK_WINDOW_CAP ? c.executionWindow : WORK_WINDOW_CAP;",
        "uint64 work = c.executionWindow;",
        Forge("tests/forge/DisputeClocks.t.sol"),
    ),
    Mutant(
        "c-held-reveal-no-fresh-grace", "a settlement that leaves the claim standing gives held challengers no "
        "fresh grace (a cheater's sybil that challenges with the right result and throws its game wins, P1)",
        "contracts/TaskMachine.sol",
        "            if (block.timestamp > t.challengeDeadline) t.revealHold = uint32(block.timestamp - t.challengeDeadline);\n",
        "",
        Forge("tests/forge/HeldChallenge.t.sol"),
    ),
    Mutant(
        "c-held-reveal-closed-while-disputed", "a challenge held behind an undecided dispute cannot be revealed past "
        "the first grace (held challengers must bet on the other game)",
        "contracts/TaskMachine.sol",
        "if (block.timestamp > end && t.openDisputes == 0) revert ChallengeWindowClosed",
        "if (block.timestamp > end) revert ChallengeWindowClosed",
        Forge("tests/forge/HeldChallenge.t.sol"),
    ),
    Mutant(
        "c-held-reveal-hold-carried", "a new claim inherits the old claim's reveal hold (its grace is stretched "
        "by an earlier game)",
        "contracts/JobRegistryBase.sol",
        "        t.revealHold = 0;\n",
        "",
        Forge("tests/forge/HeldChallenge.t.sol"),
    ),
    Mutant(
        "c-panel-commit-window-uncapped", "a task's execution window buys its panel any commit window (a no-show "
        "can hold a dispute for days per seating round)",
        "contracts/RefereePanel.sol",
        "p.workWindow < MAX_WORK_WINDOW ? p.workWindow : MAX_WORK_WINDOW",
        "p.workWindow",
        Forge("tests/forge/RefereePanel.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-clock-stopped-expires",
        "a stopped chess clock can expire (a party loses on time while the game awaits the other)",
        "contracts/lib/ChessClock.sol",
        "return c.since != 0 && elapsed(c) > allowance;",
        "return elapsed(c) > allowance;",
        Forge("tests/forge/ChessClock.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-clock-used-dropped",
        "a party's chess clock forgets its finished turns when the game packs it beside the party (each turn starts "
        "a fresh allowance: a party stalls a dispute forever)",
        "contracts/DisputeGame.sol",
        "(s.used, s.since) = (uint40(c.used), uint40(c.since));",
        "s.since = uint40(c.since);",
        Forge("tests/forge/DisputeClocks.t.sol"),
    ),
    Mutant(
        "c-panel-any-seat-votes",
        "a vote lands in the first seat whoever sends it (seats are kept by index, not by a referee's mapping)",
        "contracts/RefereePanel.sol",
        "        if (i == size) revert NotSeated(disputeId, referee);",
        "        if (i == size) i = 0;",
        Forge("tests/forge/RefereePanel.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-panel-majority-not-shown",
        "panelOf no longer shows a decided panel's majority (it is counted again from the votes, not stored)",
        "contracts/RefereePanel.sol",
        "        if (p.phase == PanelPhase.Decided && p.verdict != Verdict.None) (v.majorityVote,) = _tally(p);\n",
        "",
        Forge("tests/forge/RefereePanel.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-panel-keeps-unused-fee",
        "a cancelled panel keeps the part of the fee its seats were not paid (the challenger's, issue 23)",
        "contracts/RefereePanel.sol",
        "        if (fee > used) IERC20(address(token)).safeTransfer(game, fee - used);\n",
        "",
        Forge("tests/forge/RefereePanel.t.sol", fuzz_runs=64),
    ),
    Mutant(
        "c-random-lane-not-cleared",
        "renewing a request ORs its new target into the packed word instead of replacing its lane",
        "contracts/BlockhashRandomness.sol",
        "        _targets[key] = (_targets[key] & ~(uint256(type(uint64).max) << shift)) | (uint256(target) << shift);",
        "        _targets[key] = _targets[key] | (uint256(target) << shift);",
        Forge("tests/forge/Randomness.t.sol"),
    ),
    Mutant(
        "c-lens-no-replica-root",
        "DisputeLens shows 0 for the level-0 roots a contest opened with its pinpoint does not store",
        "contracts/DisputeLens.sol",
        "                    if (d.sides[s].root == 0) d.sides[s].root = reps[r].root;\n",
        "",
        Forge("tests/forge/DisputeGame.t.sol"),
    ),
    Mutant(
        "c-ban-count-overflows",
        "the task's ban count (a uint8) counts past 255: the 256th ban reverts the decline, report or settlement",
        "contracts/JobRegistryBase.sol",
        "        if (c != type(uint8).max) t.bannedCount = c + 1;",
        "        t.bannedCount = c + 1;",
        Forge("tests/forge/Decline.t.sol"),
    ),
    Mutant(
        "c-bond-unbounded", "the owner may set any challenger bond (10^9 VRT shuts every challenge out)",
        "contracts/DisputeGame.sol",
        "            if (value - MIN_CHALLENGER_BOND > MAX_CHALLENGER_BOND - MIN_CHALLENGER_BOND) {",
        "            if (false) {",
        Forge("tests/forge/Timelock.t.sol"),
    ),
]

CLIENTS = [
    Mutant(
        "p-storage-skip-cid", "a download is not checked against its CID (skipped hash check)",
        "clients/verity/storage/client.py",
        "        if actual != cid:\n            raise ContentMismatch(cid, actual)",
        "        if False:\n            raise ContentMismatch(cid, actual)",
        pytest(STORAGE_UNIT, k="tampered"),
    ),
    Mutant(
        "p-storage-no-size-precheck", "a download's declared size is not capped before it starts",
        "clients/verity/storage/client.py",
        "        if size > limit:\n            raise ObjectTooLarge(cid, size, limit)",
        "        if False:\n            raise ObjectTooLarge(cid, size, limit)",
        pytest(f"{STORAGE_UNIT}::test_get_declared_too_large_reverts_before_download"),
    ),
    Mutant(
        "p-storage-no-stream-cap", "a download is not capped while it streams (a lying size passes)",
        "clients/verity/storage/client.py",
        "                    if builder.size + len(piece) > limit:",
        "                    if False:",
        pytest(f"{STORAGE_UNIT}::test_get_lying_stat_capped_while_streaming_reverts"),
    ),
    Mutant(
        "p-storage-cat-before-blocks", "a multi-block file is `cat` while its blocks are still wanted from peers "
        "(js-ipfs 0.66 exits when such a cat is cut short)",
        "clients/verity/storage/client.py",
        "                self._make_local(cid, limit, deadline, t)",
        "                pass",
        pytest(f"{STORAGE_UNIT}::test_get_with_a_block_nobody_sends_is_not_found_before_any_cat_reverts"),
    ),
    Mutant(
        "p-storage-put-unchecked", "an upload's CID from the node is not checked against the local one",
        "clients/verity/storage/client.py",
        "        if cid != expected:",
        "        if False:",
        pytest(f"{STORAGE_UNIT}::test_put_node_reports_other_cid_reverts"),
    ),
    Mutant(
        "p-checkpoint-hash-unchecked", "a checkpoint is not checked against its expected (on-chain) hash",
        "clients/verity/engine/checkpoint.py",
        "    if expected_hash is not None and state.hash != expected_hash:",
        "    if False:",
        pytest("tests/engine/test_state.py::test_load_checkpoint_tampered_refused"),
    ),
    Mutant(
        "p-step-seed", "every training step draws its batch with step 0's seed (wrong step seed)",
        "clients/verity/engine/trainer.py",
        "        g = step_generator(self.task, self.step)",
        "        g = step_generator(self.task, 0)",
        pytest("tests/engine/test_portable_training.py::test_portable_traces_identical_across_threads_and_isa"),
    ),
    Mutant(
        "p-safetensors-element-cap", "a safetensors file's element cap is not enforced",
        "clients/verity/engine/tensorfile.py",
        "        if elements > max_elements:",
        "        if False:",
        pytest("tests/engine/test_data.py::test_load_shard_oversized_refused"),
    ),
    Mutant(
        "p-safetensors-dtype-type",
        "a safetensors header's dtype is not type-checked (a TypeError, retried, not a refusal)",
        "clients/verity/engine/tensorfile.py",
        "    if not isinstance(info[\"dtype\"], str):",
        "    if False:",
        pytest("tests/engine/test_tensorfile.py", k="malformedHeader"),
    ),
    Mutant(
        "p-manifest-k-divides", "a manifest whose checkpoint interval does not divide the round is accepted",
        "clients/verity/engine/manifest.py",
        "    if m.steps_per_round % m.checkpoint_interval:",
        "    if False:",
        pytest("tests/engine/test_manifest.py", k="schema_violation"),
    ),
    Mutant(
        "p-merkle-pad-last-leaf", "the Python Merkle root pads the leaf level with the last leaf, not the zero word",
        "clients/verity/engine/merkle.py",
        "    level += [ZERO] * ((1 << (len(level) - 1).bit_length()) - len(level))",
        "    level += [level[-1]] * ((1 << (len(level) - 1).bit_length()) - len(level))",
        pytest("tests/engine/test_merkle.py"),
    ),
    Mutant(
        "p-aggregate-unweighted", "the mean aggregation ignores the shards' sample counts",
        "clients/verity/engine/aggregate.py",
        "            acc += stack[i] * weights[i]\n        return acc / weights.sum()",
        "            acc += stack[i]\n        return acc / m",
        pytest("tests/engine/test_aggregate.py::test_aggregate_rules_compute_what_they_say"),
    ),
    Mutant(
        "p-shard-label-range", "a shard label equal to the class count is accepted (off by one)",
        "clients/verity/engine/data.py",
        "int(t.max()) >= hi",
        "int(t.max()) > hi",
        pytest("tests/engine/test_data.py::test_load_shard_labels_and_metadata_checked"),
    ),
    Mutant(
        "p-solver-reveal-before-commit",
        "a solver whose partner can still commit reveals its result instead of committing",
        "clients/verity/node/solver.py",
        "                    c.transact(c.jobs.functions.commit(item.task_id, "
        "replica_commitment(root, final, cid, ctx.me)))",
        "                    c.transact(c.jobs.functions.reveal(item.task_id, root, final, n, cid,\n"
        "                                                       merkle.proof(trace, 0), merkle.proof(trace, n)))",
        pytest("tests/nodes/test_solver_release.py"),
    ),
    Mutant(
        "p-verifier-commit-before-salt", "a verifier sends its challenge commitment before its salt is persisted",
        "clients/verity/node/verifier.py",
        "            return SAVE_AND_GO_ON\n",
        "",
        pytest(NODE_V2, k="verifier_persists_salt"),
    ),
    Mutant(
        "p-auditor-commit-before-salt",
        "an auditor sends its blind check in the tick that draws its salt (not yet persisted)",
        "clients/verity/node/auditor.py",
        "            return SAVE_AND_GO_ON\n",
        "",
        pytest("tests/nodes/test_auditor_units.py", k="persisted_before_the_blind_commit"),
    ),
    Mutant(
        "p-referee-no-recompute", "a referee votes the defender's claim without recomputing the step",
        "clients/verity/node/referee.py",
        "lambda: referee_vote(ctx, task, d)",
        "lambda: bytes(d.claims[1])",
        pytest(NODE_V2, k="referee_commits"),
    ),
    Mutant(
        "p-referee-wrong-step", "a referee recomputes h_s instead of h_{s+1} (votes the agreed state)",
        "clients/verity/node/compute.py",
        "    return hashes[step + 1]",
        "    return hashes[step]",
        pytest(NODE_V2, k="referee_recomputes"),
    ),
    Mutant(
        "p-keeper-finalizes-early",
        "the keeper finalizes a revealed task without asking the contract's finalizable rule",
        "clients/verity/node/keeper.py",
        "            if ready and self._try(c.jobs.functions.finalize(tid)):",
        "            if self._try(c.jobs.functions.finalize(tid)):",
        pytest(NODE_V2, k="keeper_finalizes"),
    ),
    Mutant(
        "p-keeper-reads-every-task", "every node reads every live task each chore round (a thousand calls a second "
        "at 32 nodes)",
        "clients/verity/node/keeper.py",
        "            if now >= self._next_look.get(tid, 0):",
        "            if True:",
        pytest(NODE_V2, k="keeper_readsARevealedTask"),
    ),
    Mutant(
        "p-keeper-deaf-to-task-events", "an event about a task does not bring its next look forward",
        "clients/verity/node/keeper.py",
        "            self._next_look.pop(int(ev.args[\"taskId\"]), None)",
        "            pass",
        pytest(NODE_V2, k="keeper_readsARevealedTask"),
    ),
    Mutant(
        "p-verifier-reads-while-computing", "a verifier's item reads the task and its claim every tick while its "
        "re-execution runs",
        "clients/verity/node/verifier.py",
        "        if \"final\" not in item.data and ctx.work.running(item.key):",
        "        if False:",
        pytest(NODE_V2, k="reExecuting_readsNothing"),
    ),
    Mutant(
        "p-referee-reads-while-computing", "a referee's seat reads the panel, its seat, the dispute and the task every "
        "tick while it recomputes the step",
        "clients/verity/node/referee.py",
        "        if \"vote\" not in item.data and ctx.work.running(item.key):",
        "        if False:",
        pytest(NODE_V2, k="recomputing_readsNothing"),
    ),
    Mutant(
        "p-solver-reads-while-training", "a training solver reads its task and replicas every tick",
        "clients/verity/node/solver.py",
        "        if item.phase == Phase.ASSIGNED and ctx.work.running(item.key):",
        "        if False:",
        pytest("tests/nodes/test_node_concurrency.py", k="readsNothingOfItsTask"),
    ),
    Mutant(
        "p-verifier-never-holds", "every verifier that found a wrong result opens its own game against it (four "
        "bisections and panels for one result at 32 hosts)",
        "clients/verity/node/verifier.py",
        "        if not sybil and (ahead := self._ahead(item)) is not None:",
        "        if not sybil and (ahead := None) is not None:",
        pytest("tests/nodes/test_node_v2_units.py", k="holdsItsReveal or heldBehind"),
    ),
    Mutant(
        "p-verifier-holds-behind-any-dispute", "a verifier holds its reveal behind a dispute for another result "
        "(a sybil's challenge built to lose shuts the honest one out)",
        "clients/verity/node/verifier.py",
        "or bytes(d.finals[0]) != _b(item.data[\"final\"]):",
        "or False:",
        pytest("tests/nodes/test_node_v2_units.py", k="doesNotHold"),
    ),
    Mutant(
        "p-verifier-gives-up-while-disputed", "a verifier past the first grace gives up although another dispute "
        "keeps the claim open to reveals",
        "clients/verity/node/verifier.py",
        "if c.now() > deadline + grace and int(task.openDisputes) == 0:",
        "if c.now() > deadline + grace:",
        pytest("tests/nodes/test_node_v2_units.py", k="revealsPastTheGrace"),
    ),
    Mutant(
        "p-solver-declines-after-the-grace", "a solver that first sees its slot after the decline grace still "
        "declines it (the decline reverts and the node is fined as late)",
        "clients/verity/node/solver.py",
        " or left <= 0:\n            raise exc",
        ":\n            raise exc",
        pytest("tests/nodes/test_solver_release.py", k="after_the_grace"),
    ),
    Mutant(
        "p-solver-bets-on-a-hurried-fetch", "a solver blames the poster's inputs after a fetch too short to judge "
        "them (an honest node loses its decline bet)",
        "clients/verity/node/solver.py",
        "hurried=fetched < self._fair_fetch_s(task) / 2",
        "hurried=False",
        pytest("tests/nodes/test_solver_release.py", k="fair_fetch"),
    ),
    Mutant(
        "p-loop-vote-waits-a-tick", "a referee's computed vote is committed a whole loop tick later",
        "clients/verity/node/loop.py",
        "                        if handler.advance(self.snap, item) is SAVE_AND_GO_ON and item.phase not in TERMINAL:",
        "                        if handler.advance(self.snap, item) is None and False:",
        pytest(NODE_V2, k="inTheTickThatComputedIt"),
    ),
    Mutant(
        "p-loop-acts-before-saving", "the loop advances an item again before saving what it decided (a crash "
        "leaves a commitment whose salt is lost)",
        "clients/verity/node/loop.py",
        "                            self.store.save(self.snap)  # what it decided (a salt, a vote) is on disk before it acts",
        "                            pass",
        pytest(NODE_V2, k="inTheTickThatComputedIt"),
    ),
    Mutant(
        "p-publish-before-commit", "a result's checkpoints are added to IPFS as they are written, before the commit",
        "clients/verity/node/compute.py",
        "        if publish:\n            return ctx.storage.put_file(path)",
        "        if True:\n            return ctx.storage.put_file(path)",
        pytest("tests/nodes/test_publish_units.py"),
    ),
    Mutant(
        "p-verifier-ignores-own-audit",
        "an unsampled verifier stays silent on a wrong result its own fee check re-executed",
        "clients/verity/node/verifier.py",
        "        if audited or self._sampled(tid, epoch):",
        "        if self._sampled(tid, epoch):",
        pytest("tests/nodes/test_auditor_units.py", k="unsampled_verifier"),
    ),
    Mutant(
        "p-unreachable-input-retried-late",
        "a drawn solver retries an unreachable input past the decline grace (reported late and slashed)",
        "clients/verity/node/solver.py",
        "        if left > 2 * exc.timeout + DECLINE_TX_SECONDS or left <= 0:",
        "        if True:",
        pytest("tests/nodes/test_solver_release.py", k="unreachable"),
    ),
    Mutant(
        "p-estimate-slowest-rate",
        "a node's time estimate ignores its family's calibration: the reference task's own rate (issue 24: ~20x)",
        "clients/verity/node/feasibility.py",
        "fitted[arch] = fit_speed(small, large) if t.cal_ms_per_step > 0 else fit_speed((0, 0), small)",
        "fitted[arch] = fit_speed((0, 0), small)",
        pytest("tests/nodes/test_feasibility_units.py", k="doctor_speeds"),
    ),
    Mutant(
        "p-backlog-ignored",
        "a busy node takes a slot it cannot start in time behind the work it already runs or queued",
        "clients/verity/node/feasibility.py",
        "    total = (seconds or 0.0) * SAFETY + fetch_s + backlog_s",
        "    total = (seconds or 0.0) * SAFETY + fetch_s",
        pytest("tests/nodes/test_feasibility_units.py", k="queued"),
    ),
    Mutant(
        "p-submit-window-unchecked",
        "the submit commands post a job whose largest task cannot fit the execution window given",
        "clients/verity/submit/fit.py",
        "        if given < fit.window_s:",
        "        if False:",
        pytest("tests/nodes/test_submit_fit.py", k="too_short"),
    ),
    Mutant(
        "p-escrow-formula", "the Python escrow formula forgets each round's AGGREGATE task",
        "clients/verity/chain/protocol.py",
        "(int(shards) + 1) * int(rounds)",
        "int(shards) * int(rounds)",
        pytest("tests/chain/test_protocol_module.py::test_escrow_for_formula_succeeds"),
    ),
]

MUTANTS: list[Mutant] = CONTRACTS + CLIENTS
