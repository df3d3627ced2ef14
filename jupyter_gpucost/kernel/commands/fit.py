"""``%gpucost fit``: will a model of this size fit in GPU memory?

An estimate from the parameter count, with every assumption written next to its number:

- **weights**: parameters × bytes per parameter of the dtype;
- **full fine-tuning** (AdamW): gradients in the weights' dtype, two fp32 Adam moments,
  and, for 16-bit weights, an fp32 master copy (mixed precision): 16 bytes per parameter
  in all, for bf16/fp16 as for fp32;
- **LoRA**: the base weights frozen in their dtype (8- or 4-bit for QLoRA), and adapters
  of ``LORA_FRACTION`` of the parameters trained as above (16 bytes each);
- **activations**: the model's shape is not known, so it is taken to be a decoder
  transformer with ``hidden / layers ≈ 128`` (like Llama) and ``params ≈ 12 · layers ·
  hidden²``. Inference keeps a KV cache (16-bit, full multi-head attention: models with
  grouped-query attention need several times less); training keeps ``34 · seq · batch ·
  hidden`` bytes per layer (16-bit activations, flash attention, no activation
  checkpointing: Korthikanti et al., 2022);
- **CUDA context and workspace**: ``CONTEXT_BYTES``.

Sizes are in decimal gigabytes (10⁹ bytes), as GPU boards are sold.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from ...core.currency import DEFAULT_CURRENCY
from ...core.currency import symbol as currency_symbol
from ...core.i18n import N_, _
from ...core.money import exact
from ...core.wording import columns, pad

GB = 10**9
#: the CUDA context, cuBLAS/cuDNN workspaces and allocator slack
CONTEXT_BYTES = 1 * GB
#: trained share of the parameters in LoRA (rank-16 adapters on every projection of a
#: 7B Llama are about 0.6 %)
LORA_FRACTION = Fraction(1, 100)
#: bytes per trained parameter with AdamW: weights, gradients, fp32 master, two moments
TRAINED_BYTES_MIXED = 2 + 2 + 4 + 4 + 4
TRAINED_BYTES_FP32 = 4 + 4 + 4 + 4
DEFAULT_BATCH = 1
DEFAULT_SEQ = 2048
#: hidden size / layers of the assumed shape
ASPECT = 128

DTYPES: dict[str, tuple[str, Fraction]] = {
    "fp32": ("fp32", Fraction(4)),
    "float32": ("fp32", Fraction(4)),
    "f32": ("fp32", Fraction(4)),
    "bf16": ("bf16", Fraction(2)),
    "bfloat16": ("bf16", Fraction(2)),
    "fp16": ("fp16", Fraction(2)),
    "float16": ("fp16", Fraction(2)),
    "half": ("fp16", Fraction(2)),
    "fp8": ("fp8", Fraction(1)),
    "int8": ("int8", Fraction(1)),
    "int4": ("int4", Fraction(1, 2)),
    "nf4": ("nf4", Fraction(1, 2)),
    "fp4": ("fp4", Fraction(1, 2)),
}

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?(?:e\d+)?)\s*([kmbgt]?)\s*$", re.IGNORECASE)
_SUFFIX = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12}


def parse_size(text: str) -> int:
    """A parameter count: ``7B``, ``1.5b``, ``350M``, ``70e9``, ``125k``, ``1T``."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(
            _("{size} is not a model size: write it like 7B, 1.5b, 350M or 70e9").format(
                size=repr(text)
            )
        )
    try:
        value = Decimal(match.group(1)) * _SUFFIX[match.group(2).lower()]
    except InvalidOperation:
        raise ValueError(_("{size} is not a model size").format(size=repr(text))) from None
    if value != value.to_integral_value() or value < 1:
        raise ValueError(_("{size} is not a whole number of parameters").format(size=repr(text)))
    return int(value)


def parse_dtype(text: str) -> tuple[str, Fraction]:
    try:
        return DTYPES[text.lower()]
    except KeyError:
        known = ", ".join(sorted({name for name, _ in DTYPES.values()}))
        text = _("unknown dtype {dtype}: one of {known}").format(dtype=repr(text), known=known)
        raise ValueError(text) from None


def shape(params: int) -> tuple[int, int]:
    """(hidden size, layers) of the assumed decoder for this many parameters."""
    hidden = (params * ASPECT / 12) ** (1 / 3)
    hidden_rounded = max(64, round(hidden / 64) * 64)
    layers = max(1, round(params / (12 * hidden_rounded**2)))
    return hidden_rounded, layers


#: the modes of an estimate, and how the report names them
MODES = {
    "inference": N_("inference"),
    "full fine-tuning": N_("full fine-tuning"),
    "LoRA fine-tuning": N_("LoRA fine-tuning"),
}
#: the parts of an estimate, and how the report names them
PARTS = {
    "weights": N_("weights"),
    "gradients": N_("gradients"),
    "fp32 master weights": N_("fp32 master weights"),
    "AdamW moments": N_("AdamW moments"),
    "LoRA adapters": N_("LoRA adapters"),
    "KV cache": N_("KV cache"),
    "activations": N_("activations"),
    "CUDA context, workspace": N_("CUDA context, workspace"),
}


@dataclass(frozen=True)
class Part:
    #: which part (a key of ``PARTS``); ``how``: how it was counted, in the kernel's language
    what: str
    bytes: int
    how: str


@dataclass(frozen=True)
class Estimate:
    params: int
    dtype: str
    mode: str  # inference | full fine-tuning | LoRA fine-tuning
    parts: tuple[Part, ...]
    assumptions: tuple[str, ...] = field(default_factory=tuple)

    @property
    def total_bytes(self) -> int:
        return sum(p.bytes for p in self.parts)

    def part(self, what: str) -> int:
        return sum(p.bytes for p in self.parts if p.what == what)


def _bytes(count: int | Fraction) -> int:
    return math.ceil(count)


def estimate(
    params: int,
    dtype: str = "bf16",
    *,
    finetune: bool = False,
    lora: bool = False,
    batch: int | None = None,
    seq: int | None = None,
) -> Estimate:
    """The memory a model of ``params`` parameters needs; see the module's assumptions."""
    if params < 1:
        raise ValueError(_("the model needs at least one parameter"))
    name, per = parse_dtype(dtype)
    for value, what in ((batch, "--batch"), (seq, "--seq")):
        if value is not None and value < 1:
            raise ValueError(_("{option} must be at least 1").format(option=what))
    mode = "LoRA fine-tuning" if lora else "full fine-tuning" if finetune else "inference"
    if mode == "full fine-tuning" and name not in ("fp32", "bf16", "fp16"):
        text = _(
            "full fine-tuning needs fp32, bf16 or fp16 weights, not {dtype}: for 8- or 4-bit "
            "weights add --lora (QLoRA)"
        )
        raise ValueError(text.format(dtype=name))
    b = DEFAULT_BATCH if batch is None else batch
    s = DEFAULT_SEQ if seq is None else seq
    hidden, layers = shape(params)
    assumptions = [
        _(
            "a decoder transformer of about {layers} layers × hidden size {hidden} "
            "(hidden/layers ≈ {aspect}, params ≈ 12·layers·hidden²)"
        ).format(layers=layers, hidden=hidden, aspect=ASPECT),
    ]
    if batch is None or seq is None:
        text = _("batch {batch} × {seq} tokens (give --batch and --seq for yours)")
        assumptions.append(text.format(batch=b, seq=s))
    weights = _("{n} params × {per} ({dtype})").format(n=f"{params:,}", per=_per(per), dtype=name)
    parts = [Part("weights", _bytes(params * per), weights)]
    per_parameter = _("2 × fp32 per parameter")
    if mode == "full fine-tuning":
        grad_per = per
        parts.append(Part("gradients", _bytes(params * grad_per), f"{_per(grad_per)} ({name})"))
        if name == "fp32":
            parts.append(Part("AdamW moments", params * 8, per_parameter))
            assumptions.append(_("AdamW, fp32 training: 16 B per parameter before activations"))
        else:
            parts.append(Part("fp32 master weights", params * 4, _("mixed precision")))
            parts.append(Part("AdamW moments", params * 8, per_parameter))
            text = _(
                "AdamW, mixed precision ({dtype} weights and gradients, fp32 master weights "
                "and moments): 16 B per parameter before activations"
            )
            assumptions.append(text.format(dtype=name))
    elif mode == "LoRA fine-tuning":
        adapters = _bytes(params * LORA_FRACTION)
        share = f"{float(LORA_FRACTION):.0%}"
        how = _("{n} params ({share}) × {bytes} B").format(
            n=f"{adapters:,}", share=share, bytes=TRAINED_BYTES_MIXED
        )
        parts.append(Part("LoRA adapters", adapters * TRAINED_BYTES_MIXED, how))
        text = _(
            "LoRA adapters of {share} of the parameters, trained with AdamW in mixed "
            "precision (16 B each); the base weights frozen"
        )
        assumptions.append(text.format(share=share))
    if mode == "inference":
        kv = 2 * layers * hidden * s * b * 2
        how = _("batch {batch} × {seq} tokens, 16-bit").format(batch=b, seq=s)
        parts.append(Part("KV cache", kv, how))
        assumptions.append(
            _("KV cache for full multi-head attention (grouped-query attention needs less)")
        )
    else:
        act = 34 * s * b * hidden * layers
        how = _("batch {batch} × {seq} tokens, 34·s·b·h per layer").format(batch=b, seq=s)
        parts.append(Part("activations", act, how))
        assumptions.append(
            _(
                "activations kept for the backward pass: 16-bit, flash attention, no "
                "activation checkpointing (with checkpointing about 2·s·b·h per layer)"
            )
        )
    parts.append(Part("CUDA context, workspace", CONTEXT_BYTES, _("allowance")))
    return Estimate(
        params=params, dtype=name, mode=mode, parts=tuple(parts), assumptions=tuple(assumptions)
    )


def _per(per: Fraction) -> str:
    return f"{float(per):g} B"


def gb(n: int) -> str:
    return f"{n / GB:,.1f} GB"


@dataclass(frozen=True)
class GpuMemory:
    name: str
    total_bytes: int
    free_bytes: int | None = None


@dataclass(frozen=True)
class Option:
    """A catalog GPU model the estimate fits on, with ``count`` of them."""

    model: str
    memory_bytes: int
    count: int
    per_gpu_hour: Decimal | None
    where: str
    #: the symbol of the currency the price is in
    currency_symbol: str = "$"


def catalog_options(
    total_bytes: int, max_gpus: int = 8, currency: str = DEFAULT_CURRENCY
) -> list[Option]:
    """Catalog GPU models that hold ``total_bytes``: on one GPU, else split over up to 8;
    priced from the catalog's rows in ``currency`` (prices in two currencies are never
    compared)."""
    from ...core.catalog import load_catalog
    from ...core.rightsizing import MODEL_MEMORY_BYTES

    catalog = load_catalog()
    cheapest: dict[str, tuple[Decimal, str, str]] = {}
    for row in catalog.rows:
        if row.market != "on-demand" or row.currency != currency:
            continue
        known = cheapest.get(row.model)
        if known is None or row.per_gpu_hour < known[0]:
            where = _("{provider} on-demand").format(provider=row.provider)
            cheapest[row.model] = (row.per_gpu_hour, where, currency_symbol(row.currency))
    options = []
    for model, memory in MODEL_MEMORY_BYTES.items():
        count = math.ceil(total_bytes / memory)
        if count > max_gpus:
            continue
        found = cheapest.get(model)
        if found is None:
            where = _("no on-demand price in the catalog")
            options.append(Option(model, memory, count, None, where))
        else:
            price, where, symbol = found
            options.append(Option(model, memory, count, price, where, symbol))

    def key(o: Option) -> tuple[int, Decimal, str]:
        hourly = o.per_gpu_hour * o.count if o.per_gpu_hour is not None else None
        return (o.count, hourly if hourly is not None else Decimal("1e9"), o.model)

    return sorted(options, key=key)


def report(
    est: Estimate,
    gpus: Sequence[GpuMemory],
    gpus_how: str,
    options: Sequence[Option] | None = None,
) -> str:
    """The text ``%gpucost fit`` prints, in the kernel's language."""
    head = _("%gpucost fit: {n} parameters, {dtype}, {mode}")
    mode = _(MODES.get(est.mode, est.mode))
    out = [head.format(n=f"{est.params:,}", dtype=est.dtype, mode=mode)]
    names = {p.what: _(PARTS.get(p.what, p.what)) for p in est.parts}
    total = _("total")
    width = max(columns(n) for n in [*names.values(), total])
    for p in est.parts:
        out.append(f"  {pad(names[p.what], width)}  {gb(p.bytes):>10}  {p.how}")
    out.append(f"  {pad(total, width)}  {gb(est.total_bytes):>10}")
    out.append(_("assumptions:"))
    out += [f"  - {a}" for a in est.assumptions]
    need = est.total_bytes
    fits_here = False
    if gpus:
        out.append(_("GPUs here ({how}):").format(how=gpus_how))
        for i, g in enumerate(gpus):
            if g.free_bytes is None:
                line = _("  GPU {i}: {name}, {total}")
            else:
                line = _("  GPU {i}: {name}, {total}, {free} free")
            out.append(
                line.format(
                    i=i,
                    name=g.name,
                    total=gb(g.total_bytes),
                    free=gb(g.free_bytes or 0),
                )
            )
        fits_one = [g for g in gpus if g.total_bytes >= need]
        if fits_one:
            free_ok = [g for g in fits_one if g.free_bytes is None or g.free_bytes >= need]
            fits_here = True
            if free_ok:
                text = _("fits on one GPU here ({need} of {total})")
                out.append(text.format(need=gb(need), total=gb(fits_one[0].total_bytes)))
            else:
                text = _(
                    "fits on one GPU here by its size, but not in the memory free now: free "
                    "{need} first (del tensors, torch.cuda.empty_cache())"
                )
                out.append(text.format(need=gb(need)))
        elif sum(g.total_bytes for g in gpus) >= need and len(gpus) > 1:
            text = _(
                "does not fit on one GPU here; fits only split across the {n} GPUs ({total} "
                "in all: FSDP, tensor parallelism or device_map='auto')"
            )
            out.append(text.format(n=len(gpus), total=gb(sum(g.total_bytes for g in gpus))))
        else:
            text = _("does not fit on the GPUs here: {need} needed, {largest} on the largest")
            out.append(text.format(need=gb(need), largest=gb(max(g.total_bytes for g in gpus))))
    else:
        out.append(_("no GPU here ({how}).").format(how=gpus_how))
    if options is not None and not fits_here:
        if not options:
            out.append(_("no catalog GPU holds it, even 8 of them"))
        else:
            out.append(_("it would fit on these catalog GPUs (cheapest on-demand price):"))
            for o in options:
                out.append("  " + _option(o))
    return "\n".join(out)


def _option(o: Option) -> str:
    size = f"{o.memory_bytes * o.count // GB} GB"
    if o.count == 1:
        what = _("{count}× {model} ({size})")
    else:
        what = _("{count}× {model} ({size}, split across GPUs)")
    shown = what.format(count=o.count, model=o.model, size=size)
    if o.per_gpu_hour is None:
        return f"{shown}: {o.where}"
    price = exact(o.per_gpu_hour * o.count, o.currency_symbol)
    return _("{option}: from {price}/h ({where})").format(option=shown, price=price, where=o.where)
