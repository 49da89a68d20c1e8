"""Energy counters a device exposes: NVML's on NVIDIA GPUs, RAPL's on Linux CPUs.

Each counter reads the energy used so far, in joules; a difference of two readings is the
energy between them. Nothing is estimated: where no counter can be read, :func:`open_counter`
says why, and the energy metrics are left out.

- **CUDA**: ``nvmlDeviceGetTotalEnergyConsumption`` (``nvidia-ml-py``; Volta and newer),
  the whole GPU's energy since the driver loaded, in millijoules. Trials sharing one GPU
  share its counter.
- **CPU**: the package domains of ``/sys/class/powercap/intel-rapl:*`` (``energy_uj``,
  wrapping at ``max_energy_range_uj``), summed over sockets: the whole package's energy,
  other processes' included. Linux has let only root read them since 5.10.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

__all__ = ["EnergyCounter", "open_counter"]

POWERCAP = Path("/sys/class/powercap")


class EnergyCounter:
    """Reads a device's energy counter in joules, unwrapping counters that wrap.

    Args:
        name: What is read (``nvml``, ``rapl``).
        read: Returns the raw readings in joules, one per domain.
        wrap: Each domain's wrap-around range in joules (0: never wraps).
    """

    def __init__(
        self, name: str, read: Callable[[], list[float]], wrap: list[float] | None = None
    ) -> None:
        self.name = name
        self._read = read
        self._last = read()
        self._wrap = wrap or [0.0] * len(self._last)
        self._total = 0.0

    def joules(self) -> float:
        """The energy since the counter was opened."""
        now = self._read()
        for i, (before, after) in enumerate(zip(self._last, now, strict=True)):
            delta = after - before
            if delta < 0 and self._wrap[i] > 0:
                delta += self._wrap[i]
            self._total += max(delta, 0.0)
        self._last = now
        return self._total


def _nvml_counter(device: torch.device) -> EnergyCounter:
    import pynvml

    pynvml.nvmlInit()
    props = torch.cuda.get_device_properties(device)
    handle = None
    uuid = str(getattr(props, "uuid", "") or "")
    if uuid:
        uuid = uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
        try:
            handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
        except pynvml.NVMLError:
            handle = None
    if handle is None:
        bus = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
        handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus)

    def read() -> list[float]:
        return [pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1000.0]

    return EnergyCounter("nvml", read)


def _rapl_counter() -> EnergyCounter:
    domains = sorted(
        p for p in POWERCAP.glob("intel-rapl:*") if p.name.count(":") == 1 and p.is_dir()
    )
    if not domains:
        raise OSError(f"no RAPL package domain under {POWERCAP}")
    files = [d / "energy_uj" for d in domains]
    wrap = []
    for d in domains:
        try:
            wrap.append(int((d / "max_energy_range_uj").read_text()) / 1e6)
        except (OSError, ValueError):
            wrap.append(0.0)

    def read() -> list[float]:
        return [int(f.read_text()) / 1e6 for f in files]

    return EnergyCounter("rapl", read, wrap)


def open_counter(device: torch.device) -> tuple[EnergyCounter | None, str | None]:
    """The energy counter of ``device``, or ``None`` and why none can be read."""
    try:
        if device.type == "cuda":
            return _nvml_counter(device), None
        if device.type == "cpu":
            return _rapl_counter(), None
    except ImportError:
        return None, "NVML is not installed (pip install nvidia-ml-py)"
    except Exception as error:
        text = str(error).strip() or type(error).__name__
        source = "NVML" if device.type == "cuda" else "RAPL"
        return None, f"no readable energy counter ({source}: {text})"[:300]
    return None, f"no energy counter is known for {device.type} devices"
