"""How many fits shared the device: sampled through each epoch, its max and mean reported."""

from versatil.training.fit import train
from versatil.training.metric_names import DEVICE_TRIALS_MAX, DEVICE_TRIALS_MEAN, THROUGHPUT_SHARED
from versatil.training.sharing import DeviceShareMonitor


def epoch(monitor, counts, batches):
    """Runs one epoch's hooks; the count answers ``counts`` in turn."""
    monitor.on_train_epoch_start(None, None)
    for index in range(batches):
        monitor.on_train_batch_end(None, None, None, None, index)
    monitor.on_train_epoch_end(None, None)
    assert not counts, "every count was sampled"
    return dict(monitor.epoch_metrics)


def test_each_epoch_reports_its_most_and_mean_and_a_shared_fit_stays_shared():
    counts = []
    monitor = DeviceShareMonitor(lambda: counts.pop(0), every_s=0)
    monitor.on_train_start(None, None)
    counts[:] = [1, 3, 1, 1]  # epoch start, two batches, epoch end
    assert epoch(monitor, counts, 2) == {
        DEVICE_TRIALS_MAX: 3.0,
        DEVICE_TRIALS_MEAN: 1.5,
        THROUGHPUT_SHARED: 1.0,
    }
    counts[:] = [1, 1, 1]
    # Alone now, but the fit's throughput windows still hold the shared epoch's time.
    assert epoch(monitor, counts, 1) == {
        DEVICE_TRIALS_MAX: 1.0,
        DEVICE_TRIALS_MEAN: 1.0,
        THROUGHPUT_SHARED: 1.0,
    }
    monitor.on_train_start(None, None)  # a restored fit times anew
    counts[:] = [0, 1]  # a count below 1 is the fit itself
    assert epoch(monitor, counts, 0)[THROUGHPUT_SHARED] == 0.0


def test_batches_are_sampled_at_most_every_interval():
    calls = []
    monitor = DeviceShareMonitor(lambda: calls.append(1) or 2, every_s=3600)
    monitor.on_train_start(None, None)
    monitor.on_train_epoch_start(None, None)
    for index in range(100):
        monitor.on_train_batch_end(None, None, None, None, index)
    monitor.on_train_epoch_end(None, None)
    assert len(calls) == 2  # the epoch's start and end
    assert monitor.epoch_metrics[DEVICE_TRIALS_MAX] == 2.0


def test_a_fit_given_a_count_reports_it_every_epoch(tmp_path, small_config):
    shared = train(small_config(), tmp_path / "shared", device_tenants=lambda: 2)
    for metrics in shared.history:
        assert metrics[DEVICE_TRIALS_MAX] == metrics[DEVICE_TRIALS_MEAN] == 2.0
        assert metrics[THROUGHPUT_SHARED] == 1.0
    alone = train(small_config(), tmp_path / "alone")
    assert not {DEVICE_TRIALS_MAX, DEVICE_TRIALS_MEAN, THROUGHPUT_SHARED} & set(alone.metrics)
