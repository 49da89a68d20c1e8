"""A user's project as a new user lays it out: a task module, a helper module, data, a sweep.

The module exists only in the project's directory (nothing else puts it on ``sys.path``):
tests use it where the task's code must travel to where the trials run.
"""

import textwrap

import yaml

# The user's project: a task whose batches are dicts, a helper module beside it, and a
# data file too large to ship. The module logs whether it can see the driver's copy of
# itself: on the hidden node it cannot.
TASK = """
    import os

    import lightning as L
    import torch
    from torch import nn
    from torch.utils.data import DataLoader

    from my_helpers import PairsDataset

    DRIVER_COPY = __DRIVER_COPY__


    class DictRegressor(L.LightningModule):
        def __init__(self, hidden=16, lr=0.01):
            super().__init__()
            self.save_hyperparameters()
            self.net = nn.Sequential(nn.Linear(8, hidden), nn.ReLU(), nn.Linear(hidden, 1))

        def training_step(self, batch, batch_idx):
            return nn.functional.mse_loss(self.net(batch["features"]).float(), batch["target"])

        def validation_step(self, batch, batch_idx):
            loss = nn.functional.mse_loss(self.net(batch["features"]).float(), batch["target"])
            self.log("val_loss", loss)
            self.log("sees_driver_files", float(os.path.exists(DRIVER_COPY)))

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


    class Data(L.LightningDataModule):
        def train_dataloader(self):
            return DataLoader(PairsDataset(256, seed=0), batch_size=32, shuffle=True)

        def val_dataloader(self):
            return DataLoader(PairsDataset(64, seed=1), batch_size=32)


    def build(params):
        return DictRegressor(lr=params.get("lr", 0.01)), Data()
"""

HELPERS = """
    import torch
    from torch.utils.data import Dataset


    class PairsDataset(Dataset):
        def __init__(self, n, seed):
            generator = torch.Generator().manual_seed(seed)
            self.features = torch.randn(n, 8, generator=generator)
            self.target = self.features[:, :4].sum(1, keepdim=True)

        def __len__(self):
            return len(self.features)

        def __getitem__(self, index):
            return {"features": self.features[index], "target": self.target[index]}
"""


def write_project(project, storage_path, name="hidden"):
    """The user's directory: task, helper, a large data file, and the sweep file ``name``."""
    project.mkdir()
    task = textwrap.dedent(TASK).replace("__DRIVER_COPY__", repr(str(project / "my_task.py")))
    (project / "my_task.py").write_text(task)
    (project / "my_helpers.py").write_text(textwrap.dedent(HELPERS))
    with (project / "big.bin").open("wb") as big:
        big.truncate(11 * 1024 * 1024)  # over the 10 MiB a file may ship; sparse on disk
    sweep = {
        "name": name,
        "task": {"name": "my_task:build"},
        "space": {"lr": {"grid": [0.01, 0.02]}},
        "trainer": {"max_epochs": 2, "accelerator": "cpu"},
        "max_concurrent_trials": 2,
        "confirm": {"enabled": "off"},
        "storage_path": storage_path,
    }
    (project / "sweep.yaml").write_text(yaml.safe_dump(sweep))
