"""A second trainer on an idle render slot (cli/pipeline.py: RunQueue, TrainingHelper): each run trained once, never
beside a render in the slot it borrowed, and the two trainers within the memory room. Fake processes: no torch."""

from __future__ import annotations

import threading
import time

import pytest

from cli import pipeline
from cli.jobs import MiB, training_room
from cli.media import RenderJob
from cli.pipeline import LocalPool, RunQueue, Trainer, TrainingHelper, run_pipeline

BASE = 400 * MiB


class Run:
    def __init__(self, name: str) -> None:
        self.name = name

    def digest(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return self.name


def test_the_queue_gives_the_head_to_the_trainer_and_the_fitting_tail_to_the_helper():
    a, b, small, big = Run("a"), Run("b"), Run("small"), Run("big")
    queue = RunQueue([a, big, b, small], [10 * MiB, 130 * MiB, 5 * MiB, 18 * MiB], BASE, 884 * MiB)
    assert queue.take_head() == (a, False)  # the trainer: 410 MiB
    assert queue.could_help()
    config, held = queue.take_tail(0)  # 400 + 18 beside 410: fits
    assert config is small and held == BASE + 18 * MiB
    got = []
    waiter = threading.Thread(target=lambda: got.append(queue.take_head()))
    waiter.start()  # big: 530 + 418 > 884, so the trainer waits for the helper to go
    deadline = time.monotonic() + 10
    while not queue.head_waiting and time.monotonic() < deadline:
        time.sleep(0.01)
    assert queue.head_waiting and not got
    assert queue.take_tail(held) is None  # the helper stops: the trainer waits for room
    queue.helper_gone()
    waiter.join(10)
    assert got == [(big, False)] and not queue.head_waiting
    assert not queue.could_help()  # b (405) beside the trainer's 530 MiB: 935 > 884
    assert queue.take_tail(0) is None
    assert queue.take_head() == (b, True)  # a fresh process for b: then a helper fits again
    assert queue.trainer_bytes == BASE + 5 * MiB and queue.take_head() is None


def test_a_large_run_goes_first_while_scenes_wait_for_the_slot():
    backlog = [True]
    runs = [Run("a"), Run("big"), Run("b")]
    queue = RunQueue(runs, [5 * MiB, 130 * MiB, 5 * MiB], BASE, 884 * MiB, backlog=lambda: backlog[0])
    assert queue.take_head() == (runs[1], False)  # no helper could run now: the large one
    backlog[0] = False
    assert queue.take_head() == (runs[0], False)  # in order again; no helper asked, so no fresh process
    assert not queue.could_help() and queue.take_head() == (runs[2], True)


def test_no_helper_starts_for_less_work_than_its_start_costs():
    """A helper's process imports torch before its first run (cli.pipeline.HELPER_MIN_WORK): the runs left must hold
    at least that much work (simulation.runs.work) for one to start; the trainer does less alone."""
    from simulation.config import RunConfig
    from simulation.runs import work

    tiny, long = RunConfig(steps=20, depth=3), RunConfig(steps=2000, depth=8)
    assert work(tiny) * 2 < pipeline.HELPER_MIN_WORK <= work(long)
    for runs, helps in (([tiny, tiny, tiny], False), ([tiny, long, tiny], True)):
        queue = RunQueue(runs, [MiB] * 3, BASE, 884 * MiB, works=list(map(work, runs)),
                         min_helper_work=pipeline.HELPER_MIN_WORK)
        queue.take_head()
        assert queue.could_help() is helps, runs
    assert RunQueue([tiny] * 3, [MiB] * 3, BASE, 884 * MiB).could_help()  # no works given: any work is enough


def test_without_room_there_is_no_helper():
    queue = RunQueue([Run("a"), Run("b")], [0, 0], BASE, None)
    assert not queue.could_help() and queue.take_tail(0) is None
    assert training_room(False, budget=1024 * MiB) == (1024 - 140) * MiB


class FakeProc:
    def __init__(self, who: str) -> None:
        self.who = who
        self.stdin = self
        self.returncode = 0

    def close(self) -> None:
        pass

    def wait(self, timeout=None) -> int:
        return 0

    def poll(self):
        return 0

    def send_signal(self, sig) -> None:
        pass


def _job(scene: str, *digests: str) -> RenderJob:
    return RenderJob(scene=scene, module="m", params={}, attrs={}, traces={f"run{i}": d for i, d in enumerate(digests)},
                     source="s", quality="l", lang="en", format="mp4", transparent=False, output="/nowhere")


@pytest.mark.parametrize("room", [884 * MiB, None], ids=["room for two trainers", "no room"])
def test_the_helper_trains_on_the_idle_slot_and_never_beside_a_render(monkeypatch, tmp_path, room):
    monkeypatch.setenv("RESIDUAL_CACHE", str(tmp_path))
    lock = threading.Lock()
    trained: dict[str, list[str]] = {}
    busy = {"render": 0, "helper": 0, "most": 0}
    procs = iter(["trainer", *[f"helper{i}" for i in range(100)]])
    monkeypatch.setattr(pipeline, "_start_trainer", lambda: FakeProc(next(procs)))

    def train_one(proc, config):
        helper = proc.who != "trainer"
        with lock:
            trained.setdefault(config.digest(), []).append(proc.who)
            if helper:
                busy["helper"] += 1
                busy["most"] = max(busy["most"], busy["helper"] + busy["render"])
        time.sleep(0.02)
        with lock:
            busy["helper"] -= helper
        return [(config.digest(), None)]

    def render(job, env=None, **kw):
        with lock:
            busy["render"] += 1
            busy["most"] = max(busy["most"], busy["helper"] + busy["render"])
        time.sleep(0.03)
        with lock:
            busy["render"] -= 1
        return []

    monkeypatch.setattr(pipeline, "_train_one", train_one)
    monkeypatch.setattr(pipeline, "run_worker", render)
    runs = [Run(f"r{i}") for i in range(30)]
    todo = [_job("Early", "r0"), _job("Many", *(r.name for r in runs[1:20])), _job("Late", *(r.name for r in runs[20:]))]
    pool = LocalPool(2)
    queue = RunQueue(runs, [MiB] * len(runs), BASE, room)
    helper = TrainingHelper(queue, pool)
    helper.POLL = 0.01
    written, failures = run_pipeline(todo, pool, Trainer(runs, queue=queue), 1, lambda note: None, lambda: 2,
                                     helper=helper)
    assert failures == []
    assert sorted(trained) == sorted(r.name for r in runs)
    assert all(len(who) == 1 for who in trained.values())  # each run once
    assert busy["most"] <= 1  # the borrowed slot: a helper's run or a render, never both
    helped = [name for name, who in trained.items() if who[0] != "trainer"]
    if room is None:
        assert helped == []
    else:
        assert helped  # "Many" waits for 19 runs: the idle slot trained some of them
        assert trained["r29"][0] != "trainer"  # from the tail
