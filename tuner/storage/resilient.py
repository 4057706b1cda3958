"""``ResilientStorage``: an Optuna storage whose calls wait out database outages.

Every call goes through ``Retrier``: a fault that means 'the database is unreachable or busy'
(connection refused or reset, server restarting, SQLite locked) is retried with capped backoff
for up to ``outage_s``; any other error is raised at once. Two calls are not plainly
idempotent and get care after a retry: finishing a trial (its first attempt may have committed
before the connection dropped) and claiming a queued trial.

Stale-trial checks are suspended for one grace period after an outage: heartbeats could not be
recorded while the database was away, so every running trial would look dead.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Container, Sequence
from datetime import datetime
from functools import partial
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import BaseStorage
from optuna.storages._heartbeat import BaseHeartbeat
from optuna.study._frozen import FrozenStudy
from optuna.study._study_direction import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from tuner.errors import DiskError, StorageUnavailable

StaleCallback = Callable[[optuna.Study, FrozenTrial], None]


def is_transient(err: BaseException) -> bool:
    """Whether ``err`` means 'the database is unreachable or busy', not 'the request is bad'."""
    import sqlalchemy.exc as sa

    for e in _chain(err):
        if isinstance(e, sa.DBAPIError) and e.connection_invalidated:
            return True
        if isinstance(e, sa.OperationalError | sa.InterfaceError | sa.DisconnectionError):
            return True
        driver = type(e).__module__.split(".", 1)[0]
        if driver in ("psycopg2", "psycopg") and type(e).__name__ in (
            "OperationalError",
            "InterfaceError",
        ):
            return True
    return False


# SQLite's words for a database file the machine will not let it use: no retry mends these.
_SQLITE_REFUSALS = {
    "database or disk is full": "the disk is full",
    "attempt to write a readonly database": "the file or its folder is read-only",
    "file is not a database": "not an SQLite database (truncated or overwritten?)",
    "database disk image is malformed": "a damaged SQLite database (truncated?)",
    "unable to open database file": "cannot be opened (its folder is missing or read-only)",
    "disk i/o error": "a disk I/O error",
}


def disk_refusal(err: BaseException) -> str | None:
    """Why the database file cannot be used, when ``err`` says the machine refused it."""
    for e in _chain(err):
        text = str(e).lower()
        for words, why in _SQLITE_REFUSALS.items():
            if words in text:
                return why
    return None


def _chain(err: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cur: BaseException | None = err
    while cur is not None and cur not in seen:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def first_line(err: BaseException) -> str:
    cause = _chain(err)[-1]
    lines = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {lines[0] if lines else ''}"


class Retrier:
    """Runs storage calls, waiting out transient database faults with capped backoff."""

    def __init__(self, outage_s: float, report: Callable[[str], None], where: str = "") -> None:
        self.outage_s, self.report, self.where = outage_s, report, where
        self.last_outage = float("-inf")  # monotonic time a fault was last seen

    def call(self, what: str, fn: Callable[[], Any]) -> Any:
        delay, since = 0.5, None
        while True:
            try:
                result = fn()
            except Exception as err:
                if (why := disk_refusal(err)) is not None:
                    raise DiskError(f"{self.where or 'the storage'}: {why} ({what})") from err
                if not is_transient(err):
                    raise
                since = self._wait(what, err, since, delay)
                delay = min(delay * 2, 10.0)
                continue
            if since is not None:
                self.report(f"storage reachable again after {time.monotonic() - since:.0f}s")
            return result

    def _wait(self, what: str, err: Exception, since: float | None, delay: float) -> float:
        now = time.monotonic()
        self.last_outage = now
        if since is None:
            self.report(f"storage unreachable ({what}: {first_line(err)}); retrying")
            since = now
        if now - since > self.outage_s:
            raise StorageUnavailable(
                f"storage unreachable for {now - since:.0f}s ({what}: {first_line(err)}); "
                "giving up (raise --outage to wait longer)"
            ) from err
        time.sleep(delay)
        return since


class ResilientStorage(BaseStorage, BaseHeartbeat):
    """Delegates to ``inner`` through a ``Retrier``; heartbeats through ``heartbeat``."""

    def __init__(
        self,
        inner: BaseStorage,
        retry: Retrier,
        grace_s: float,
        heartbeat: BaseHeartbeat | None = None,
    ) -> None:
        self.inner, self.retry, self.grace_s, self.heartbeat = inner, retry, grace_s, heartbeat

    def _r(self, what: str, fn: Callable[[], Any]) -> Any:
        return self.retry.call(what, fn)

    # Studies.
    def create_new_study(
        self, directions: Sequence[StudyDirection], study_name: str | None = None
    ) -> int:
        return int(
            self._r("create study", lambda: self.inner.create_new_study(directions, study_name))
        )

    def delete_study(self, study_id: int) -> None:
        self._r("delete study", lambda: self.inner.delete_study(study_id))

    def set_study_user_attr(self, study_id: int, key: str, value: Any) -> None:
        self._r("set study attr", lambda: self.inner.set_study_user_attr(study_id, key, value))

    def set_study_system_attr(self, study_id: int, key: str, value: Any) -> None:
        self._r("set study attr", lambda: self.inner.set_study_system_attr(study_id, key, value))

    def get_study_id_from_name(self, study_name: str) -> int:
        return int(self._r("find study", lambda: self.inner.get_study_id_from_name(study_name)))

    def get_study_name_from_id(self, study_id: int) -> str:
        return str(self._r("read study", lambda: self.inner.get_study_name_from_id(study_id)))

    def get_study_directions(self, study_id: int) -> list[StudyDirection]:
        return list(self._r("read study", lambda: self.inner.get_study_directions(study_id)))

    def get_study_user_attrs(self, study_id: int) -> dict[str, Any]:
        return dict(self._r("read study", lambda: self.inner.get_study_user_attrs(study_id)))

    def get_study_system_attrs(self, study_id: int) -> dict[str, Any]:
        return dict(self._r("read study", lambda: self.inner.get_study_system_attrs(study_id)))

    def get_all_studies(self) -> list[FrozenStudy]:
        return list(self._r("list studies", self.inner.get_all_studies))

    # Trials.
    def create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> int:
        return int(
            self._r("create trial", lambda: self.inner.create_new_trial(study_id, template_trial))
        )

    def set_trial_param(
        self,
        trial_id: int,
        param_name: str,
        param_value_internal: float,
        distribution: BaseDistribution,
    ) -> None:
        self._r(
            "set param",
            lambda: self.inner.set_trial_param(
                trial_id, param_name, param_value_internal, distribution
            ),
        )

    def get_trial_id_from_study_id_trial_number(self, study_id: int, trial_number: int) -> int:
        return int(
            self._r(
                "find trial",
                lambda: self.inner.get_trial_id_from_study_id_trial_number(study_id, trial_number),
            )
        )

    def set_trial_state_values(
        self, trial_id: int, state: TrialState, values: Sequence[float] | None = None
    ) -> bool:
        attempts = [0]

        def once() -> bool:
            attempts[0] += 1
            try:
                return bool(self.inner.set_trial_state_values(trial_id, state, values))
            except UpdateFinishedTrialError:
                # A retry after a commit whose answer was lost finds its own write.
                if attempts[0] > 1 and self.inner.get_trial(trial_id).state == state:
                    return True
                raise

        done = bool(self._r("set trial state", once))
        if not done and state == TrialState.RUNNING and attempts[0] > 1 and self.heartbeat:
            # The lost first attempt may have claimed this queued trial for us: one heartbeat
            # makes such an orphan visible to the dead-worker check instead of running forever.
            self.record_heartbeat(trial_id)
        return done

    def set_trial_intermediate_value(self, trial_id: int, step: int, value: float) -> None:
        self._r("set value", lambda: self.inner.set_trial_intermediate_value(trial_id, step, value))

    def set_trial_user_attr(self, trial_id: int, key: str, value: Any) -> None:
        self._r("set trial attr", lambda: self.inner.set_trial_user_attr(trial_id, key, value))

    def set_trial_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        self._r("set trial attr", lambda: self.inner.set_trial_system_attr(trial_id, key, value))

    def get_trial(self, trial_id: int) -> FrozenTrial:
        trial: FrozenTrial = self._r("read trial", lambda: self.inner.get_trial(trial_id))
        return trial

    def get_all_trials(
        self,
        study_id: int,
        deepcopy: bool = True,
        states: Container[TrialState] | None = None,
    ) -> list[FrozenTrial]:
        return list(
            self._r("read trials", lambda: self.inner.get_all_trials(study_id, deepcopy, states))
        )

    def remove_session(self) -> None:
        self.inner.remove_session()

    # Heartbeats.
    def record_heartbeat(self, trial_id: int) -> None:
        """One attempt: a missed beat is retried at the next interval, not here."""
        if self.heartbeat is None:
            return
        try:
            self.heartbeat.record_heartbeat(trial_id)
        except Exception as err:
            if not is_transient(err):
                raise
            self.retry.last_outage = time.monotonic()

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        if self.heartbeat is None:
            return []
        if time.monotonic() - self.retry.last_outage < self.grace_s:
            return []  # heartbeats could not be written during the outage: wait one grace
        hb = self.heartbeat
        stale = list(self._r("check heartbeats", lambda: hb._get_stale_trial_ids(study_id)))
        if time.monotonic() - self.retry.last_outage < self.grace_s:
            return []  # the check itself waited out an outage: the same holds from now on
        return stale + [i for i in self._never_beaten(study_id) if i not in stale]

    def _never_beaten(self, study_id: int) -> list[int]:
        """RUNNING trials older than one grace that never recorded a heartbeat: their worker
        died between claiming them and its first beat (the heartbeat checks of optuna skip
        such trials, which would then hold a budget place for ever)."""
        has_beaten = getattr(self.heartbeat, "has_beaten", None)
        if has_beaten is None:
            return []
        now = datetime.now()
        running = self.get_all_trials(study_id, deepcopy=False, states=(TrialState.RUNNING,))
        old = [
            t._trial_id
            for t in running
            if t.datetime_start and (now - t.datetime_start).total_seconds() > self.grace_s
        ]
        return [i for i in old if not self._r("check heartbeats", partial(has_beaten, i))]

    def get_heartbeat_interval(self) -> int | None:
        return None if self.heartbeat is None else self.heartbeat.get_heartbeat_interval()

    def get_heartbeat_stale_trial_callback(self) -> StaleCallback | None:
        if self.heartbeat is None:
            return None
        return self.heartbeat.get_heartbeat_stale_trial_callback()
