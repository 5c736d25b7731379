import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="training needs the 'train' extra (torch)")
pytest.importorskip("onnxruntime", reason="export checks need onnxruntime")

from rt_lidar.rinet.export import compare_onnx, export_onnx
from rt_lidar.rinet.maskdir import build_mask_dir
from rt_lidar.rinet.model import (
    Discriminator,
    Generator,
    ModelConfig,
    count_flops,
    count_params,
)
from rt_lidar.rinet.train import TrainConfig, load_generator, raydrop_metrics, train

TINY = ModelConfig(width=128, height=48, base=4, depth=3, disc_base=8, disc_layers=2)


@pytest.fixture
def kitti_masks(kitti_object_root: Path, tmp_path: Path) -> Path:
    out = tmp_path / "masks"
    build_mask_dir("kitti-object", kitti_object_root, out)
    return out


def test_short_training_on_the_real_frame_lowers_l1_and_resumes(kitti_masks: Path, tmp_path: Path):
    run = tmp_path / "run"
    cfg = TrainConfig(model=TINY, steps=30, batch=1, lr=3e-3, checkpoint_every=10, progress=False, flip=False)
    m = train(kitti_masks, run, cfg, resume=False)
    assert m["steps"] == 30 and m["held_out"] is False
    assert m["l1_last"] < 0.8 * m["l1_first"]
    saved = json.loads((run / "metrics.json").read_text())
    for key in ("accuracy", "precision", "recall", "f1", "intensity_mae", "intensity_rmse"):
        assert 0.0 <= saved["model"][key] <= 1.0
    assert saved["baseline_keep_all"]["recall"] == 0.0
    # resume: picks the checkpoint up and runs on to the new step count
    m2 = train(kitti_masks, run, TrainConfig(model=TINY, steps=35, batch=1, progress=False), resume=True)
    assert m2["steps"] == 35


def test_exported_onnx_matches_pytorch(tmp_path: Path):
    import torch

    torch.manual_seed(0)
    gen = Generator(TINY).eval()
    path = export_onnx(gen, tmp_path / "m.onnx")
    assert compare_onnx(gen, path) < 1e-4


def test_exported_checkpoint_matches_pytorch(kitti_masks: Path, tmp_path: Path):
    cfg = TrainConfig(model=TINY, steps=3, batch=1, progress=False)
    train(kitti_masks, tmp_path / "run", cfg, resume=False)
    path = export_onnx(tmp_path / "run" / "checkpoint.pt", tmp_path / "m.onnx")
    assert compare_onnx(tmp_path / "run" / "checkpoint.pt", path) < 1e-4
    assert load_generator(tmp_path / "run" / "checkpoint.pt").cfg == TINY


def test_model_size_and_flops_are_stated():
    cfg = ModelConfig()
    gen = Generator(cfg)
    assert 100_000 < count_params(gen) < 500_000  # < 2 MB as float32
    flops = count_flops(gen, cfg.height, cfg.width)
    assert 1e8 < flops < 2e9
    assert count_params(Discriminator(cfg)) > 0
    with pytest.raises(ValueError, match="multiple"):
        ModelConfig(width=100)


def test_raydrop_metrics_count_drop_as_positive():
    label = np.array([[1, 1, 2, 2, 0]], np.uint8)
    inten = np.array([[0.5, 0.2, 0, 0, 0]], np.float32)
    pred_drop = np.array([[False, True, True, False, True]])
    pred_int = np.array([[0.6, 0.2, 0, 0, 0]], np.float32)
    m = raydrop_metrics(pred_drop, pred_int, inten, label)
    assert m["pixels"] == 4 and m["accuracy"] == 0.5
    assert m["precision"] == 0.5 and m["recall"] == 0.5 and m["f1"] == 0.5
    assert m["intensity_mae"] == pytest.approx(0.05)


class _Payload:
    """Unpickling this runs ``os.system`` in a plain pickle load."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


def test_a_checkpoint_that_names_code_is_refused_without_running_it(tmp_path):
    import torch

    from rt_lidar.errors import ConfigError
    from rt_lidar.rinet.train import load_generator

    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.pt"
    torch.save({"model": {}, "gen": _Payload(str(marker))}, evil)
    with pytest.raises(ConfigError, match=r"evil\.pt"):
        load_generator(evil)
    assert not marker.exists()
