"""The input example a checkpoint directory keeps: a real batch's rows, as predict takes them."""

import json

import lightning as L
import torch
from torch import nn

from versatil.training.constants import PrecisionType
from versatil.training.input_example import (
    INPUT_EXAMPLE_FILENAME,
    example_inputs,
    write_input_example,
)


class Positional(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 2)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.linear(obs)


class Keyword(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 3)

    def forward(self, tokens: torch.Tensor, scale: torch.Tensor, causal: bool = True) -> dict:
        return {"logits": self.embed(tokens).sum(1) * scale, "tokens": tokens}


def test_tuple_batch_gives_its_first_item_rows() -> None:
    obs, action = torch.randn(8, 3, dtype=torch.bfloat16), torch.randn(8, 2)
    rows = example_inputs(Positional(), (obs, action))
    assert isinstance(rows, torch.Tensor) and rows.dtype == torch.float32
    assert torch.equal(rows, obs[:4].float())
    assert torch.equal(example_inputs(Positional(), obs, rows=2), obs[:2].float())


def test_dict_batch_gives_the_items_the_forward_names() -> None:
    batch = {
        "tokens": torch.randint(0, 10, (6, 5)),
        "scale": torch.rand(6, 1),
        "labels": torch.zeros(6),  # not a forward argument: left out
    }
    rows = example_inputs(Keyword(), batch)
    assert set(rows) == {"tokens", "scale"}
    assert rows["tokens"].dtype == torch.int64 and torch.equal(rows["tokens"], batch["tokens"][:4])
    assert torch.equal(rows["scale"], batch["scale"][:4])


def test_undeterminable_inputs_give_no_example() -> None:
    assert example_inputs(Keyword(), {"tokens": torch.zeros(4, 5, dtype=torch.long)}) is None
    assert example_inputs(Positional(), ([torch.zeros(2, 3), torch.zeros(2, 3)],)) is None
    assert example_inputs(Positional(), ("text", torch.zeros(2))) is None
    assert example_inputs(Positional(), {"obs": torch.zeros(2, 3)}) is not None


def test_the_hook_decides_and_outputs_are_recorded(tmp_path) -> None:
    module = Positional()
    module.forward_inputs = lambda batch: (batch["x"],)
    rows = example_inputs(module, {"x": torch.randn(5, 3), "y": torch.zeros(5)})
    module.train()
    assert write_input_example(tmp_path, module, rows, PrecisionType.FP32)
    assert module.training  # restored
    data = json.loads((tmp_path / INPUT_EXAMPLE_FILENAME).read_text())
    assert data["inputs"]["dtype"] == "float32" and len(data["inputs"]["data"]) == 4
    with torch.no_grad():
        expected = module(rows)
    assert torch.allclose(torch.tensor(data["outputs"]["data"]), expected)


def test_dict_outputs_and_a_failing_forward(tmp_path) -> None:
    module = Keyword()
    rows = example_inputs(
        module, {"tokens": torch.randint(0, 10, (3, 5)), "scale": torch.ones(3, 1)}
    )
    assert write_input_example(tmp_path, module, rows, PrecisionType.FP32)
    outputs = json.loads((tmp_path / INPUT_EXAMPLE_FILENAME).read_text())["outputs"]["dict"]
    assert outputs["tokens"]["dtype"] == "int64" and outputs["logits"]["dtype"] == "float32"
    assert not write_input_example(
        tmp_path / "bad", Positional(), torch.zeros(2, 7), PrecisionType.FP32
    )
    assert not (tmp_path / "bad").exists()


class NoForward(L.LightningModule):
    """A user's module that calls its layers in its steps and defines no forward."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(3, 1)


class BareNoForward(nn.Module):
    pass


def test_a_module_without_its_own_forward_gives_no_example() -> None:
    batch = {"features": torch.zeros(4, 3), "target": torch.zeros(4, 1)}
    assert example_inputs(NoForward(), batch) is None
    assert example_inputs(NoForward(), (torch.zeros(4, 3), torch.zeros(4))) is None
    assert example_inputs(BareNoForward(), torch.zeros(4, 3)) is None


def test_a_failed_forward_is_one_line_without_a_traceback(tmp_path, caplog) -> None:
    assert not write_input_example(tmp_path, Positional(), torch.zeros(2, 7), PrecisionType.FP32)
    (record,) = [r for r in caplog.records if "no input example" in r.getMessage()]
    assert record.exc_info is None and "(RuntimeError: " in record.getMessage()
