"""Training RINet on a mask directory (``rinet build-mask`` or ``rinet generate-pairs`` output).

Loss: L1 of the intensity head against the target mask over true returns, times ``lambda_l1``; plus
binary cross-entropy of the drop head over labelled pixels (drops weighted ``drop_pos_weight``), times
``lambda_drop``; plus pix2pix's adversarial term from a PatchGAN, times ``lambda_adv``. Held-out
metrics (every k-th frame): raydrop accuracy / precision / recall / F1 with drop = positive, and
intensity MAE / RMSE on [0, 1] over true returns; the baseline that keeps every point with the physics
intensity is scored beside them. Checkpoints every ``checkpoint_every`` steps; a run resumes from
``OUT/checkpoint.pt``.
"""

from __future__ import annotations

import json
import pickle
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from tqdm import tqdm

from rt_lidar.errors import ConfigError
from rt_lidar.rinet.masks import LABEL_DROP, LABEL_NONE, LABEL_RETURN, IntensityMask
from rt_lidar.rinet.model import Discriminator, Generator, ModelConfig, count_flops, count_params
from rt_lidar.schema import check_fields, spec

__all__ = [
    "MaskDataset",
    "TrainConfig",
    "evaluate",
    "load_generator",
    "load_mask_dir",
    "raydrop_metrics",
    "train",
]


@dataclass(frozen=True)
class TrainConfig:
    """Everything a training run depends on (written to ``OUT/config.json``)."""

    model: ModelConfig = field(default_factory=ModelConfig)
    steps: int = spec(2000, 1, 10**9)
    batch: int = spec(8, 1, 4096)
    lr: float = spec(1e-3, 0.0, 1.0)
    lambda_l1: float = spec(100.0, 0.0, None)
    lambda_drop: float = spec(10.0, 0.0, None)
    lambda_adv: float = spec(1.0, 0.0, None)
    drop_pos_weight: float = spec(4.0, 0.0, None)
    """Weight of the (rare) drop pixels in the BCE term."""
    val_every: int = spec(5, 1, None)
    """Every k-th frame is held out (k >= 2; a single frame is both trained and scored on)."""
    seed: int = spec(0, 0, 2**63 - 1)
    checkpoint_every: int = spec(200, 1, None)
    flip: bool = True
    threads: int = spec(2, 1, 1024)
    progress: bool = True

    def __post_init__(self) -> None:
        check_fields(self, "rinet train")


@dataclass
class MaskDataset:
    """Images (N, 3, H, W) float32 in [0, 1], target intensity (N, 1, H, W), labels (N, 1, H, W) uint8."""

    names: list[str]
    images: np.ndarray
    intensity: np.ndarray
    label: np.ndarray

    def subset(self, idx: list[int]) -> MaskDataset:
        """The frames ``idx``."""
        return MaskDataset(
            [self.names[i] for i in idx], self.images[idx], self.intensity[idx], self.label[idx]
        )


def _nearest(a: np.ndarray, h: int, w: int) -> np.ndarray:
    rows = ((np.arange(h) + 0.5) * a.shape[0] / h).astype(np.int64)
    cols = ((np.arange(w) + 0.5) * a.shape[1] / w).astype(np.int64)
    return a[rows][:, cols]


def load_mask_dir(root: str | Path, width: int, height: int) -> MaskDataset:
    """Read ``root/masks.json`` and its images and masks, resized to ``width`` x ``height``."""
    root = Path(root)
    index = root / "masks.json"
    if not index.is_file():
        raise FileNotFoundError(f"{root}: no masks.json (make one with 'rt-lidar rinet build-mask')")
    frames = json.loads(index.read_text())["frames"]
    if not frames:
        raise ConfigError(f"{index}: no frames")
    imgs, inten, labs, names = [], [], [], []
    for fr in frames:
        img_path = Path(fr["image"]) if Path(fr["image"]).is_absolute() else root / fr["image"]
        with Image.open(img_path) as im:
            imgs.append(
                np.asarray(im.convert("RGB").resize((width, height), Image.Resampling.BILINEAR), np.float32)
                / 255
            )
        m = IntensityMask.load(root / fr["mask"])
        inten.append(_nearest(m.intensity, height, width))
        labs.append(_nearest(m.label, height, width))
        names.append(str(fr["name"]))
    return MaskDataset(
        names,
        np.stack(imgs).transpose(0, 3, 1, 2).copy(),
        np.stack(inten)[:, None].astype(np.float32),
        np.stack(labs)[:, None].astype(np.uint8),
    )


def raydrop_metrics(
    pred_drop: np.ndarray, pred_int: np.ndarray, inten: np.ndarray, label: np.ndarray
) -> dict:
    """Accuracy / precision / recall / F1 (drop = positive) over labelled pixels; MAE / RMSE over returns."""
    valid = label != LABEL_NONE
    true_drop = label == LABEL_DROP
    tp = int(np.count_nonzero(pred_drop & true_drop & valid))
    fp = int(np.count_nonzero(pred_drop & ~true_drop & valid))
    fn = int(np.count_nonzero(~pred_drop & true_drop & valid))
    tn = int(np.count_nonzero(~pred_drop & ~true_drop & valid))
    n = max(tp + fp + fn + tn, 1)
    prec = tp / (tp + fp) if tp + fp else 0.0
    rec = tp / (tp + fn) if tp + fn else 0.0
    ret = label == LABEL_RETURN
    err = (pred_int - inten)[ret]
    return {
        "pixels": tp + fp + fn + tn,
        "drop_share": (tp + fn) / n,
        "accuracy": (tp + tn) / n,
        "precision": prec,
        "recall": rec,
        "f1": 2 * prec * rec / (prec + rec) if prec + rec else 0.0,
        "intensity_mae": float(np.abs(err).mean()) if err.size else 0.0,
        "intensity_rmse": float(np.sqrt((err**2).mean())) if err.size else 0.0,
    }


def evaluate(gen: Generator, data: MaskDataset, batch: int = 4) -> dict[str, Any]:
    """Held-out metrics of ``gen`` on ``data``, and of the keep-every-point baseline (never drops; the
    physics intensity, which is the target itself on embedded-world pairs)."""
    was = gen.training
    gen.eval()
    drops, ints = [], []
    with torch.no_grad():
        for i in range(0, len(data.names), batch):
            logits = gen(torch.from_numpy(data.images[i : i + batch]))
            drops.append(torch.sigmoid(logits[:, 0:1]).numpy())
            ints.append(torch.sigmoid(logits[:, 1:2]).numpy())
    gen.train(was)
    pd, pi = np.concatenate(drops) > 0.5, np.concatenate(ints)
    model = raydrop_metrics(pd, pi, data.intensity, data.label)
    base = raydrop_metrics(np.zeros_like(pd), data.intensity, data.intensity, data.label)
    return {"model": model, "baseline_keep_all": base}


def _losses(
    gen: Generator,
    disc: Discriminator,
    rgb: torch.Tensor,
    inten: torch.Tensor,
    label: torch.Tensor,
    cfg: TrainConfig,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    valid = (label != LABEL_NONE).float()
    ret = (label == LABEL_RETURN).float()
    drop_t = (label == LABEL_DROP).float()
    logits = gen(rgb)
    drop_p, int_p = torch.sigmoid(logits[:, 0:1]), torch.sigmoid(logits[:, 1:2])
    # the heads are trained apart: L1 of the intensity over returns, BCE of the drop over labelled pixels
    l1 = ((int_p - inten).abs() * ret).sum() / ret.sum().clamp(min=1.0)
    pos_weight = torch.tensor(cfg.drop_pos_weight)
    bce = F.binary_cross_entropy_with_logits(logits[:, 0:1], drop_t, reduction="none", pos_weight=pos_weight)
    bce = (bce * valid).sum() / valid.sum().clamp(min=1.0)
    fake = torch.cat([drop_p, int_p], 1) * valid
    adv = F.binary_cross_entropy_with_logits(d_out := disc(rgb, fake), torch.ones_like(d_out))
    return l1, bce, adv


def train(data_dir: str | Path, out_dir: str | Path, cfg: TrainConfig, resume: bool = True) -> dict[str, Any]:
    """Train (or resume) on ``data_dir``; writes ``checkpoint.pt``, ``config.json`` and ``metrics.json``
    to ``out_dir``; returns the metrics."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(max(1, cfg.threads))
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    data = load_mask_dir(data_dir, cfg.model.width, cfg.model.height)
    n = len(data.names)
    k = max(2, cfg.val_every)
    val_idx = [i for i in range(n) if i % k == k - 1] if n >= 2 else [0]
    train_idx = [i for i in range(n) if i not in val_idx] if n >= 2 else [0]
    tr, va = data.subset(train_idx), data.subset(val_idx)
    (out / "config.json").write_text(json.dumps({"data": str(data_dir), **asdict(cfg)}, indent=2))

    gen, disc = Generator(cfg.model), Discriminator(cfg.model)
    opt_g = torch.optim.Adam(gen.parameters(), lr=cfg.lr, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=cfg.lr, betas=(0.5, 0.999))
    step, history = 0, []
    ckpt = out / "checkpoint.pt"
    if resume and ckpt.is_file():
        state = _load_checkpoint(ckpt)
        if state["model"] != cfg.model.to_dict():
            raise ConfigError(f"{ckpt}: model settings differ from this run's; use another --out")
        gen.load_state_dict(state["gen"])
        disc.load_state_dict(state["disc"])
        opt_g.load_state_dict(state["opt_g"])
        opt_d.load_state_dict(state["opt_d"])
        step, history = int(state["step"]), list(state["history"])
        rng = np.random.default_rng([cfg.seed, step])

    def save() -> None:
        torch.save(
            {
                "model": cfg.model.to_dict(),
                "gen": gen.state_dict(),
                "disc": disc.state_dict(),
                "opt_g": opt_g.state_dict(),
                "opt_d": opt_d.state_dict(),
                "step": step,
                "history": history,
            },
            ckpt.with_suffix(".tmp"),
        )
        ckpt.with_suffix(".tmp").replace(ckpt)

    t0 = time.perf_counter()
    bar = tqdm(total=cfg.steps, initial=step, disable=not cfg.progress, desc="rinet train", unit="step")
    while step < cfg.steps:
        pick = rng.integers(0, len(tr.names), size=min(cfg.batch, max(len(tr.names), 1)))
        rgb, inten, label = (torch.from_numpy(a[pick]) for a in (tr.images, tr.intensity, tr.label))
        if cfg.flip and rng.random() < 0.5:
            rgb, inten, label = rgb.flip(3), inten.flip(3), label.flip(3)
        # discriminator: real (target) vs fake (detached prediction), both on labelled pixels only
        valid = (label != LABEL_NONE).float()
        real = torch.cat([(label == LABEL_DROP).float(), inten], 1) * valid
        with torch.no_grad():
            lg = gen(rgb)
            fake = torch.cat([torch.sigmoid(lg[:, 0:1]), torch.sigmoid(lg[:, 1:2])], 1) * valid
        d_real, d_fake = disc(rgb, real), disc(rgb, fake)
        loss_d = 0.5 * (
            F.binary_cross_entropy_with_logits(d_real, torch.ones_like(d_real))
            + F.binary_cross_entropy_with_logits(d_fake, torch.zeros_like(d_fake))
        )
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()
        # generator
        l1, bce, adv = _losses(gen, disc, rgb, inten, label, cfg)
        loss_g = cfg.lambda_l1 * l1 + cfg.lambda_drop * bce + cfg.lambda_adv * adv
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
        step += 1
        history.append([step, l1.item(), bce.item(), adv.item(), loss_d.item()])
        bar.update(1)
        bar.set_postfix(l1=f"{history[-1][1]:.4f}", bce=f"{history[-1][2]:.3f}")
        if step % cfg.checkpoint_every == 0 or step == cfg.steps:
            save()
    bar.close()
    metrics = {
        "steps": step,
        "train_frames": len(tr.names),
        "held_out_frames": len(va.names),
        "held_out": n >= 2,
        "train_seconds": time.perf_counter() - t0,
        "l1_first": history[0][1] if history else None,
        "l1_last": float(np.mean([h[1] for h in history[-10:]])) if history else None,
        "generator_params": count_params(gen),
        "generator_flops": count_flops(gen, cfg.model.height, cfg.model.width),
        "discriminator_params": count_params(disc),
        "model_config": cfg.model.to_dict(),
        **evaluate(gen, va),
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    return metrics


def _load_checkpoint(path: str | Path) -> dict[str, Any]:
    """A checkpoint's tensors and plain values only: never runs code a file's pickle names."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise ConfigError(f"{path}: not a plain RINet checkpoint (refused to unpickle code): {exc}") from exc
    if not isinstance(state, dict) or "model" not in state or "gen" not in state:
        raise ConfigError(f"{path}: not a RINet checkpoint (needs the 'model' and 'gen' entries)")
    return state


def load_generator(checkpoint: str | Path) -> Generator:
    """The generator of a training checkpoint, in eval mode."""
    state = _load_checkpoint(checkpoint)
    gen = Generator(ModelConfig(**state["model"]))
    gen.load_state_dict(state["gen"])
    return gen.eval()
