"""Reads ppolab's TensorBoard event files with TensorBoard's own reader (the
oracle of tests/training/test_tensorboard.cpp): EventAccumulator over a
folder, every scalar tag with its (step, value) pairs, and the records'
wall times.

Usage: tensorboard_read.py LOGDIR OUT.json
Exit code 3 when tensorboard cannot be imported."""
import json
import sys

try:
    import tensorboard
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError as e:
    print("tensorboard not importable:", e)
    sys.exit(3)


def main():
    logdir, out = sys.argv[1], sys.argv[2]
    acc = EventAccumulator(logdir, size_guidance={"scalars": 0})  # 0: keep every event
    acc.Reload()
    scalars = {}
    wall = set()
    for tag in acc.Tags()["scalars"]:
        events = acc.Scalars(tag)
        scalars[tag] = [[e.step, e.value] for e in events]
        wall.update(e.wall_time for e in events)
    json.dump({"version": tensorboard.__version__, "scalars": scalars, "wall_times": sorted(wall),
               "file_version": acc.file_version}, open(out, "w"))


if __name__ == "__main__":
    main()
