"""The claim / run / tell loop of one worker process (see ``tuner.run.worker`` for the rules)."""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import fail_stale_trials
from optuna.trial import FrozenTrial, TrialState

from tuner.errors import InfraError
from tuner.record.study import read_budget
from tuner.record.trial import mark_failed, mark_interrupted
from tuner.run.context import StudyContext
from tuner.run.objective import Report, StudyObjective, in_budget, requeue
from tuner.run.orphans import WORKER_ATTR, fail_orphans
from tuner.run.signals import signals_deferred, why_stopped
from tuner.space.sample import suggest
from tuner.storage.lock import StudyLock
from tuner.storage.resilient import ResilientStorage

__all__ = ["WORKER_ATTR", "Heartbeat", "Joined", "Tally", "WorkerLoop", "study_tally"]


@dataclass
class Tally:
    """The study's budget and counts as one claim saw them."""

    budget: int
    complete: int
    running: int

    @property
    def done(self) -> bool:
        return self.complete >= self.budget

    @property
    def full(self) -> bool:
        return self.complete + self.running >= self.budget


@dataclass
class Joined:
    """A worker's handle on the shared study: context, study, storage and lock."""

    ctx: StudyContext
    study: optuna.Study
    storage: ResilientStorage
    lock: StudyLock
    budget: int


_log = logging.getLogger(__name__)


class Heartbeat:
    """Records a trial's heartbeat every ``interval_s`` on a daemon thread until stopped."""

    def __init__(self, storage: ResilientStorage, trial_id: int, interval_s: float) -> None:
        self.storage, self.trial_id, self.interval_s = storage, trial_id, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-{trial_id}")
        self._thread.daemon = True

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.storage.record_heartbeat(self.trial_id)
            except Exception as err:  # a bad beat must not end the trial; the next one may land
                # Said aloud: enough missed beats and another worker fails this trial, and the
                # log is then the only trace of why.
                _log.warning("trial %d: heartbeat not recorded: %s", self.trial_id, err)


@contextmanager
def _quiet() -> Iterator[None]:
    # Heartbeats with ask/tell are what optuna warns about ('supposed to be used with
    # Study.optimize'): this loop records them itself; fail_stale_trials is 'experimental'.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Heartbeat of storage")
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        yield


def study_tally(study: optuna.Study, default_budget: int) -> Tally:
    """The shared budget (a study attr), the trials that count toward it (launches, not rule
    breakers, repeats of a measured launch or confirmations) and the RUNNING ones, read now."""
    stored = read_budget(study.user_attrs)
    budget = stored if stored is not None else default_budget
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING))
    complete = sum(in_budget(t) for t in trials)
    running = sum(t.state == TrialState.RUNNING for t in trials)
    return Tally(budget, complete, running)


class WorkerLoop:
    """Claims, runs and tells trials of ``joined.study`` until the budget is met."""

    def __init__(self, joined: Joined, objective: StudyObjective, who: str, poll_s: float) -> None:
        self.j, self.objective, self.who, self.poll_s = joined, objective, who, poll_s
        self.ran = 0
        self.waiting_reported = False

    @property
    def study(self) -> optuna.Study:
        return self.j.study

    def run(self, deadline: float | None, report: Report) -> Tally:
        """Until the budget is met, the deadline passes, or infra faults pile up."""
        while True:
            if self._must_stop(deadline, report):
                return self.tally()
            tally, trial = self._claim_whole()
            if tally.done:
                return tally
            if trial is None:
                self._wait(tally, report)
                continue
            self.waiting_reported = False
            self._run(trial)

    def drain(self, deadline: float | None, report: Report) -> None:
        """Run the queued trials (confirmations, and launches queued again after a fault)
        until none is waiting, on top of the budget."""
        while not self._must_stop(deadline, report):
            _, trial = self._claim_whole(queued_only=True)
            if trial is None:
                return
            self._run(trial)

    def _must_stop(self, deadline: float | None, report: Report) -> bool:
        if deadline is not None and self.objective.clock.now() >= deadline:
            report(f"timeout{self.objective.clock.unit}: no new trials are started")
            return True
        if (why := self.objective.stop_reason()) is not None:
            report(f"stopping: {why}")
            return True
        return False

    def tally(self) -> Tally:
        return study_tally(self.study, self.j.ctx.trials)

    def _claim_whole(self, queued_only: bool = False) -> tuple[Tally, optuna.Trial | None]:
        """A claim that a Ctrl-C / SIGTERM cannot split: inside ``ask()`` it would leave a
        RUNNING trial nobody holds, so the signals wait until the claim is done or undone."""
        claimed: optuna.Trial | None = None
        try:
            with signals_deferred():
                tally, claimed = self._claim(queued_only)
        except KeyboardInterrupt as err:
            if claimed is not None:
                self._abandon(claimed, why_stopped(err))
            raise
        return tally, claimed

    def _claim(self, queued_only: bool) -> tuple[Tally, optuna.Trial | None]:
        with self.j.lock.held(), _quiet():
            fail_stale_trials(self.study)  # dead workers' trials: FAIL, config queued again
            fail_orphans(self.study, self.objective.report)  # this host's dead runs: no grace
            tally = self.tally()
            if (tally.full and not queued_only) or (queued_only and not self._queued()):
                return tally, None
            trial = self.study.ask()
            try:
                self.j.storage.set_trial_system_attr(trial._trial_id, WORKER_ATTR, self.who)
                self.j.storage.record_heartbeat(trial._trial_id)
                suggest(trial, self.j.ctx.space)  # visible to every sampler before the lock goes
            except BaseException:
                self._give_back(trial, "interrupted while claiming")  # the lock is held here
                raise
            return tally, trial

    def _queued(self) -> bool:
        return bool(self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))

    def _wait(self, tally: Tally, report: Report) -> None:
        if not self.waiting_reported:
            report(
                f"waiting: {tally.complete}/{tally.budget} complete and {tally.running} running "
                "elsewhere; staying until they finish in case one must run again"
            )
            self.waiting_reported = True
        began = time.monotonic()
        time.sleep(self.poll_s)
        self.objective.clock.waited(time.monotonic() - began)

    def _run(self, trial: optuna.Trial) -> None:
        interval = self.j.storage.get_heartbeat_interval() or 30
        values: list[float] | None = None
        state = TrialState.FAIL
        try:
            with Heartbeat(self.j.storage, trial._trial_id, interval):
                values = self.objective(trial)
            state = TrialState.COMPLETE
        except KeyboardInterrupt as err:
            self._abandon(trial, why_stopped(err))
            raise
        except InfraError:
            pass  # The objective recorded why; _finish() below queues the config again
        except UpdateFinishedTrialError:
            # Another worker failed this trial as stale (its heartbeats stopped reaching the
            # database, e.g. during an outage) and queued its config again: drop this run.
            self.objective.report(
                f"trial {trial.number}: taken over by another worker after its heartbeat was "
                "lost; this run's result is discarded"
            )
            return
        except Exception as err:  # a bug, not a measurement: FAIL the trial, then stop
            with suppress(UpdateFinishedTrialError):
                mark_failed(trial, f"error in tune: {type(err).__name__}: {err}")
            self._tell(trial, TrialState.FAIL, None)
            raise
        finally:
            self.ran += 1
        frozen = self._finish(trial, state, values)
        if frozen is not None:
            self.objective.record(self.study, frozen)

    def _finish(
        self, trial: optuna.Trial, state: TrialState, values: list[float] | None
    ) -> FrozenTrial | None:
        """Tell ``trial``; a FAIL (an infrastructure fault) has its config queued again in
        the same step under the study lock, since a worker joining meanwhile queues every
        FAIL it finds without a re-run (``seed_queue``)."""
        with signals_deferred(), self.j.lock.held():  # a Ctrl-C must not split the two
            frozen = self._tell(trial, state, values)
            if frozen is not None and frozen.state == TrialState.FAIL:
                requeue(self.study, frozen)
        return frozen

    def _tell(
        self, trial: optuna.Trial, state: TrialState, values: list[float] | None
    ) -> FrozenTrial | None:
        """Finish ``trial``; None when another worker took it over (its heartbeat was lost)."""
        try:
            frozen = self.study.tell(trial, values, state, skip_if_finished=True)
        except UpdateFinishedTrialError:
            frozen = self.study._storage.get_trial(trial._trial_id)
        if frozen.state != state:
            self.objective.report(
                f"trial {trial.number}: taken over by another worker after its heartbeat was "
                f"lost; this run's result is discarded ({frozen.state.name} stands)"
            )
            return None
        return frozen

    def _abandon(self, trial: optuna.Trial, why: str) -> None:
        """Mark ``trial`` interrupted and queue its config at once, for any worker to run."""
        with self.j.lock.held():
            self._give_back(trial, why)

    def _give_back(self, trial: optuna.Trial, why: str) -> None:
        # Under the study lock: the FAIL and the re-queue are one step for every other worker.
        with suppress(UpdateFinishedTrialError):  # already failed by a heartbeat check
            mark_interrupted(trial, why)
        frozen = self._tell(trial, TrialState.FAIL, None)
        if frozen is not None:
            requeue(self.study, frozen)
