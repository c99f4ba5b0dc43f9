"""Worker lanes: the minibatch streams one worker advances, with their evaluations and records.

Runs are grouped into streams (runs that share minibatches) and whole streams are dealt to lanes,
one lane per worker (`adcs.sim.workers`); a lane steps its streams round by round, evaluates
them and keeps the availability records of its seeds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adcs.sim.checkpoint import _run_state, _set_run_state, _StreamKey, _StreamState
from adcs.sim.context import _Context
from adcs.sim.evaluate import _Evaluator
from adcs.sim.lockstep import _Stream
from adcs.sim.runstate import _new_run
from adcs.sim.spec import Evaluation, RunSpec, SimConfig
from adcs.streams import stream_key

_PROGRESS_EVERY = 50

_MAX_RECORDED_AVAILABILITY_BITS = 1 << 31
"""Availability masks are stored while rounds × N stays below this (256 MB packed)."""


class _Lane:
    """The streams one worker advances, with their evaluations and availability records."""

    def __init__(
        self,
        streams: list[_Stream],
        keys: list[_StreamKey],
        seeds: dict[int, int],
        evaluator: _Evaluator,
        ctx: _Context,
        n_evals: int,
    ) -> None:
        self.streams = streams
        self.keys = keys  # the stream identities, parallel to ``streams``
        self.seeds = seeds  # seed → its availability/dropout key
        self.evaluator = evaluator
        self.ctx = ctx
        n_runs = sum(len(s.runs) for s in streams)
        self.client_acc = np.empty((n_runs, n_evals, evaluator.n_clients))
        self.test_loss = np.empty((n_runs, n_evals))
        rounds, n = ctx.config.rounds, ctx.data.n_clients
        self.n_available = {s: np.empty(rounds, dtype=np.int32) for s in seeds}
        keep = not ctx.always and rounds * n <= _MAX_RECORDED_AVAILABILITY_BITS
        self.available: dict[int, NDArray[np.uint8]] | None = (
            {s: np.empty((rounds, (n + 7) // 8), dtype=np.uint8) for s in seeds} if keep else None
        )
        self.rounds_done = 0
        self.next_eval = 0  # index into config.eval_rounds of the next evaluation

    def export(self) -> dict[str, Any]:
        """The lane's whole state after a round, by stream and by seed (picklable).

        A forked worker sends it back; merged over lanes it is a `SimCheckpoint`.
        """
        streams: dict[_StreamKey, _StreamState] = {}
        row = 0
        for key, stream in zip(self.keys, self.streams, strict=True):
            rows = slice(row, row + len(stream.runs))
            streams[key] = _StreamState(
                stream.params,
                [_run_state(r) for r in stream.runs],
                self.client_acc[rows],
                self.test_loss[rows],
                stream.server_state,
            )
            row = rows.stop
        return {
            "rounds_done": self.rounds_done,
            "next_eval": self.next_eval,
            "streams": streams,
            "n_available": self.n_available,
            "available": self.available,
        }

    def absorb(self, state: Mapping[str, Any]) -> None:
        """Take the state of this lane's streams from `export` (of any lanes' layout)."""
        self.rounds_done = int(state["rounds_done"])
        self.next_eval = int(state["next_eval"])
        row = 0
        for key, stream in zip(self.keys, self.streams, strict=True):
            saved: _StreamState = state["streams"][key]
            rows = slice(row, row + len(stream.runs))
            stream.params = np.array(saved.params, dtype=np.float32)
            stream.server_state = saved.server_state
            for run, values in zip(stream.runs, saved.runs, strict=True):
                _set_run_state(run, values)
            self.client_acc[rows] = saved.client_acc
            self.test_loss[rows] = saved.test_loss
            row = rows.stop
        for seed in self.seeds:
            self.n_available[seed][:] = state["n_available"][seed]
            if self.available is not None:
                self.available[seed][:] = state["available"][seed]

    def evaluate(self, at: int) -> list[Evaluation]:
        """Evaluate every run at round ``at``; the runs' evaluations, as their results hold them."""
        # stream by stream: the products then do not depend on which streams share a lane, so
        # neither do the numbers (whatever ``workers`` is, and across a resume)
        row = 0
        for stream in self.streams:
            rows = slice(row, row + len(stream.runs))
            self.client_acc[rows, self.next_eval], self.test_loss[rows, self.next_eval] = (
                self.evaluator(stream.params)
            )
            row = rows.stop
        index, self.next_eval = self.next_eval, self.next_eval + 1
        return self._events(index, at)

    def _events(self, index: int, at: int) -> list[Evaluation]:
        ids = [run.spec.run_id for stream in self.streams for run in stream.runs]
        return [
            Evaluation(run_id, at, acc.copy(), float(loss))
            for run_id, acc, loss in zip(
                ids, self.client_acc[:, index], self.test_loss[:, index], strict=True
            )
        ]

    def run(
        self,
        config: SimConfig,
        report: Callable[[], None],
        stop: threading.Event,
        until: int,
        on_eval: Callable[[list[Evaluation]], None] | None = None,
    ) -> None:
        """Advance every stream from round ``rounds_done`` to round ``until`` (≤ T).

        Evaluations happen before the rounds they name; the last one (at T) once ``until`` = T.
        Each is handed to ``on_eval`` as it happens.
        """
        eval_at = config.eval_rounds
        for t in range(self.rounds_done, until):
            if stop.is_set():  # another worker failed
                return
            if t == eval_at[self.next_eval]:
                events = self.evaluate(int(eval_at[self.next_eval]))
                if on_eval is not None:
                    on_eval(events)
            masks = {seed: self.ctx.availability(key, t) for seed, key in self.seeds.items()}
            for seed, avail in masks.items():
                self.n_available[seed][t] = avail.clients.size
                if self.available is not None:
                    self.available[seed][t] = np.packbits(avail.mask)
            for stream in self.streams:
                stream.step(t, masks[stream.runs[0].spec.seed])
            self.rounds_done = t + 1
            if self.rounds_done % _PROGRESS_EVERY == 0:
                report()
        if self.rounds_done == config.rounds and self.next_eval < eval_at.size:
            events = self.evaluate(int(eval_at[self.next_eval]))
            if on_eval is not None:
                on_eval(events)
        report()


def _deal_lanes(
    runs: Sequence[RunSpec], ctx: _Context, workers: int
) -> tuple[list[_Lane], list[list[int]]]:
    """Group the runs into streams and deal whole streams to ``workers`` lanes.

    Streams are dealt largest first to the least loaded lane. A stream is never split, so the
    shared products — and therefore every number — are the same whatever ``workers`` is.
    """
    keyed: dict[_StreamKey, list[int]] = {}
    for i, spec in enumerate(runs):
        key = (spec.seed, None if ctx.config.common_minibatches else spec.run_id)
        keyed.setdefault(key, []).append(i)
    n_lanes = min(workers, len(keyed))
    load = [0] * n_lanes
    dealt: list[list[_StreamKey]] = [[] for _ in range(n_lanes)]
    for key in sorted(keyed, key=lambda k: -len(keyed[k])):
        s = load.index(min(load))
        dealt[s].append(key)
        load[s] += len(keyed[key])
    evaluator = _Evaluator(ctx.data, ctx.model, ctx.config.eval_clients)
    n_evals = ctx.config.eval_rounds.size
    lanes, members = [], []
    for keys in dealt:
        streams, member = [], []
        for seed, run_id in keys:
            indices = keyed[(seed, run_id)]
            stream_runs = [_new_run(runs[i], ctx) for i in indices]
            streams.append(_Stream(stream_runs, stream_key(seed, run_id), stream_key(seed), ctx))
            member.extend(indices)
        seeds = {seed: stream_key(seed) for seed, _ in keys}
        lanes.append(_Lane(streams, list(keys), seeds, evaluator, ctx, n_evals))
        members.append(member)
    return lanes, members
