"""Export fitted actuator models to MuJoCo MJCF: one path for a one-joint bench, one joint of a given
robot file and every joint of a whole robot.

An export is a **base tree** with some of its joints **patched** (:func:`patch_mjcf`), each by the
same one-joint patch (:func:`actuatorlab.export.mjcf_joint.patch_joint`: fitted joint properties,
the joint's actuator replaced by the fitted servo law; the mapping is in that module's docstring):

* a one-joint model file without a base (:func:`export_mjcf`): the base is the bench robot the
  model was fitted on (:func:`actuatorlab.robots.bench.bench_tree`: a pendulum on a hinge, or a
  carriage on a slide whose moving mass is the joint armature), at ``timestep``, its body turned
  by the fitted encoder offset ``q_offset``; its joint ``joint`` gets the actuator ``actuator``.
* a one-joint model file with ``base_xml`` and ``joint``: a copy of that robot MJCF.
* a whole robot (``arm_model.json``, :mod:`.robot`): the robot's own MJCF, every modelled joint.

A base file is never written; ``<include>`` files are inlined and asset directories re-pointed so
that the copy loads from the output's directory. Every patched joint leaves a comment naming its
model and what it cannot express; the file is loaded by MuJoCo before it replaces anything.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco

from ..errors import ModelError, UnknownNameError
from ..models.modelfile import load_model
from ..robots.bench import BENCH_JOINT, BENCH_TIMESTEP, bench_tree
from .mjcf_joint import (Servo, _comment_text, _Context, _joint_type, _not_representable, _read_values, has_dcmotor,
                         model_context, patch_joint)

__all__ = ["ExportResult", "export_mjcf", "patch_mjcf", "MjcfBase", "bench_base", "file_base", "write_mjcf",
           "BENCH_TIMESTEP", "has_dcmotor"]

#: the bench's actuator name (its joint is :data:`~actuatorlab.robots.bench.BENCH_JOINT`)
BENCH_ACTUATOR = "actuator"


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export_mjcf` wrote.

    Attributes:
        path: the MJCF file written.
        written: name -> value of every quantity set in the file (SI units, see docs/export.md),
            e.g. ``"joint.armature"``, ``"actuator.kp_eff"``, ``"actuator.type"``.
        not_representable: one line per fitted mechanism the file cannot reproduce, with the reason.
    """

    path: Path
    written: dict[str, float | str]
    not_representable: list[str]


@dataclass(frozen=True)
class MjcfBase:
    """A tree to patch: ``root`` (changed in place by :func:`patch_mjcf`); ``label`` names it in
    errors; ``file``: the base file's name, None for the bench (whose body rotation applies the fitted ``q_offset``); ``written``:
    what the base itself sets (the bench: its timestep and body)."""

    root: ET.Element
    label: str
    file: str | None = None
    written: dict[str, float | str] | None = None


# ----------------------------------------------------------------------------------------------
# base trees


def _parse(path: Path) -> ET.Element:
    try:
        parser = ET.XMLParser(target=ET.TreeBuilder(insert_comments=True))
        return ET.parse(path, parser=parser).getroot()
    except (OSError, ET.ParseError) as e:
        raise ModelError(f"{path}: cannot read the MJCF ({e})") from None


def _inline_includes(elem: ET.Element, main_dir: Path, read: list[Path]) -> None:
    """Replace every <include file=...> (paths relative to the main file's directory) by the
    children of the included file's root, recursively (MuJoCo XML reference, include)."""
    i = 0
    while i < len(elem):
        child = elem[i]
        if child.tag == "include":
            path = (main_dir / child.get("file", "")).resolve()
            sub = _parse(path)
            read.append(path)
            elem.remove(child)
            for k, sc in enumerate(list(sub)):
                elem.insert(i + k, sc)
            continue  # re-examine the inserted elements (nested includes)
        if isinstance(child.tag, str):
            _inline_includes(child, main_dir, read)
        i += 1


def _repoint_assets(root: ET.Element, main_dir: Path, out_dir: Path) -> None:
    """Make mesh/texture directories (and <model file>) resolve from ``out_dir`` like they did
    from ``main_dir`` (MuJoCo XML reference, compiler/meshdir, texturedir, assetdir)."""
    compilers = [c for c in root.iter("compiler")]
    meshdir = texturedir = assetdir = None
    for c in compilers:
        meshdir = c.get("meshdir", meshdir)
        texturedir = c.get("texturedir", texturedir)
        assetdir = c.get("assetdir", assetdir)

    def rel(d: str | None) -> str:
        target = main_dir / (d or "")
        try:
            return Path(os.path.relpath(target, out_dir)).as_posix()
        except ValueError:  # different drives
            return target.as_posix()

    mesh_new = rel(meshdir if meshdir is not None else assetdir)
    tex_new = rel(texturedir if texturedir is not None else assetdir)
    for c in compilers:
        for k in ("meshdir", "texturedir", "assetdir"):
            c.attrib.pop(k, None)
    if not compilers:
        compilers = [ET.Element("compiler")]
        root.insert(0, compilers[0])
    compilers[0].set("meshdir", mesh_new)
    compilers[0].set("texturedir", tex_new)
    for m in root.iter("model"):
        f = m.get("file")
        if f and not Path(f).is_absolute():
            m.set("file", rel(f))


def file_base(base_xml: str | Path, out: Path) -> MjcfBase:
    """A robot MJCF file as a base for ``out``: loaded by MuJoCo (checked), includes inlined, asset
    directories re-pointed to ``out``'s folder. Refuses an ``out`` that is the file or one it includes."""
    base = Path(base_xml).resolve()
    if out.resolve() == base:
        raise ModelError(f"{base}: refusing to overwrite the base model; choose another out_path")
    try:
        mujoco.MjModel.from_xml_path(str(base))
    except Exception as e:  # mujoco raises ValueError with the compiler message
        raise ModelError(f"{base}: base model does not load: {e}") from None
    read = [base]
    root = _parse(base)
    _inline_includes(root, base.parent, read)
    if out.resolve() in read:
        raise ModelError(f"{out}: refusing to overwrite a file the base model includes")
    _repoint_assets(root, base.parent, out.resolve().parent)
    return MjcfBase(root, str(base), base.name)


def bench_base(model: dict[str, Any], timestep: float | None = None) -> MjcfBase:
    """The bench robot of a one-joint model dict (:func:`actuatorlab.robots.bench.bench_tree`) at
    ``timestep`` [s] (default :data:`BENCH_TIMESTEP`), its body turned by the fitted ``q_offset``."""
    dt = BENCH_TIMESTEP if timestep is None else float(timestep)
    if not dt > 0:
        raise ModelError(f"export: timestep must be > 0 (got {dt})")
    setup = dict(model.get("setup") or {})
    name = "actuatorlab_" + "_".join(str(x) for x in (model.get("actuator") or setup.get("actuator")
                                                        or "actuator", model.get("model", "model")))
    q_offset = _read_values(model).get("q_offset", 0.0)
    root, _, written = bench_tree(setup, _joint_type(model, setup), name=name, timestep=dt, q_offset=q_offset)
    return MjcfBase(root, "bench", written=written)


# ----------------------------------------------------------------------------------------------
# the patch of every joint


def _compile(root: ET.Element, out: Path) -> mujoco.MjModel:
    """``root`` compiled from a temporary file beside ``out`` (its asset paths are relative to it)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.stem}.", suffix=".partial.xml", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(ET.tostring(root, encoding="unicode"))
        return mujoco.MjModel.from_xml_path(tmp)
    except ValueError as e:
        raise ModelError(f"{out}: the exported MJCF does not load in MuJoCo: {e}") from None
    finally:
        os.unlink(tmp)


def _context(model: dict[str, Any], servo: Servo, bench: bool, m0: mujoco.MjModel, joint: str,
             label: str) -> _Context:
    """The mapping context of one joint's model dict, the joint's step, type and range from ``m0``
    (the compiled base)."""
    ctx = model_context(model, servo=servo, bench=bench)
    names = [m0.joint(i).name for i in range(m0.njnt)]
    if joint not in names:
        raise UnknownNameError(f"joint (in {Path(label).name})", joint, [n for n in names if n])
    jid = m0.joint(joint).id
    want = mujoco.mjtJoint.mjJNT_HINGE if ctx.joint_type == "revolute" else mujoco.mjtJoint.mjJNT_SLIDE
    if m0.jnt_type[jid] != want:
        raise ModelError(f"{label}: joint {joint!r} is a {mujoco.mjtJoint(m0.jnt_type[jid]).name}, "
                         f"the model is for a {ctx.joint_type} joint")
    ctrlrange = (float(m0.jnt_range[jid][0]), float(m0.jnt_range[jid][1])) if m0.jnt_limited[jid] else None
    return dataclasses.replace(ctx, timestep=float(m0.opt.timestep), ctrlrange=ctrlrange)


def _header(model: dict[str, Any], ctx: _Context, not_rep: list[str]) -> ET.Element[Any]:
    text = (f" Exported by actuatorlab {model.get('package_version', '?')} from model "
            f"'{model.get('model', '?')}' (actuator {model.get('actuator') or ctx.setup.get('actuator', '?')}, "
            f"controller {ctx.controller}, {ctx.joint_type}, git {model.get('git_revision', '?')}). "
            "Not representable:" + "".join(f"\n    - {line}" for line in not_rep) + ("" if not_rep else " nothing")
            + "\n  See docs/export.md for the mapping. ")
    return ET.Comment(_comment_text(text))


def patch_mjcf(base: MjcfBase, out: Path, models: dict[str, dict[str, Any]], *, servo: Servo = "auto",
               act_names: dict[str, str] | None = None) -> dict[str, tuple[dict[str, float | str], list[str]]]:
    """Patch every joint of ``models`` ({joint: one-joint model dict}) in ``base.root``, in order,
    each by :func:`~actuatorlab.export.mjcf_joint.patch_joint` against the tree compiled beside
    ``out`` so far; each joint's model and losses go into a comment at the top. Returns {joint:
    (written quantities, not representable)}; a file base adds its timestep and name."""
    for md in models.values():  # every model checked before anything is compiled
        model_context(md, servo=servo)
    out_ = {}
    for joint, md in models.items():
        m0 = _compile(base.root, out)
        ctx = _context(md, servo, base.file is None, m0, joint, base.label)
        written, notes = patch_joint(base.root, m0, ctx, joint, label=base.label,
                                     act_name=(act_names or {}).get(joint))
        if base.file is not None:
            written.update(timestep=float(m0.opt.timestep), base_xml=base.file)
        not_rep = _not_representable(ctx) + notes
        base.root.insert(0, _header(md, ctx, not_rep))
        out_[joint] = (written, not_rep)
    return out_


# ----------------------------------------------------------------------------------------------
# writing


def write_mjcf(root: ET.Element, out: Path) -> None:
    """Indent ``root`` and write it to ``out`` atomically: a temporary file beside ``out``, loaded by
    MuJoCo, then renamed over ``out``."""
    ET.indent(root, space="  ")
    text = ET.tostring(root, encoding="unicode") + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.stem}.", suffix=".xml", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        try:
            mujoco.MjModel.from_xml_path(tmp)
        except Exception as e:
            raise ModelError(f"{out}: the exported MJCF does not load in MuJoCo: {e}") from None
        os.chmod(tmp, 0o644)  # mkstemp creates 0600
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def export_mjcf(model: dict[str, Any] | str | Path, out_path: str | Path, *, base_xml: str | Path | None = None,
                joint: str | None = None, servo: Servo = "auto",
                timestep: float | None = None) -> ExportResult:
    """Write the fitted one-joint actuator ``model`` (a parsed ``model.json``) as MJCF to ``out_path``.

    Args:
        model: the dict of ``RUN/model.json`` (format "actuatorlab-model"), or its path.
        out_path: the MJCF file to write (atomically; parent directory created). It is loaded with
            ``mujoco.MjModel.from_xml_path`` before it replaces any existing file.
        base_xml: a robot MJCF to patch (never modified); None writes the model's bench robot.
        joint: name of the joint of ``base_xml`` that gets the actuator (required with base_xml).
        servo: "auto" (dcmotor when MuJoCo has it), "dcmotor" (exact PWM law) or "position"
            (first-order position servo, for MuJoCo < 4). Only PWM controllers use it.
        timestep: [s] physics step of the bench (default :data:`BENCH_TIMESTEP`); ignored with
            base_xml, where the base model's timestep is kept.

    Returns:
        :class:`ExportResult` (path, what was written, what is not representable and why).

    Raises:
        ModelError: bad model dict, missing constants, base file unusable, out_path would overwrite
            an input file, or the written MJCF does not load.
        UnknownNameError: unknown controller, or ``joint`` not in ``base_xml`` (lists the joints).
    """
    label = None if isinstance(model, dict) else str(model)
    out = Path(out_path)
    try:
        md = model if isinstance(model, dict) else load_model(model)
        model_context(md, servo=servo)
        if base_xml is None:
            if joint is not None:
                raise ModelError("export: 'joint' is only meaningful with base_xml")
            base = bench_base(md, timestep)
            (written, lost), = patch_mjcf(base, out, {BENCH_JOINT: md}, servo=servo,
                                          act_names={BENCH_JOINT: BENCH_ACTUATOR}).values()
            written = {**(base.written or {}), **written}
        else:
            if joint is None:
                raise ModelError(f"{Path(base_xml).resolve()}: give the name of the joint to patch (joint=...)")
            base = file_base(base_xml, out)
            (written, lost), = patch_mjcf(base, out, {joint: md}, servo=servo).values()
    except ModelError as e:  # name the model file in errors about its content
        msg = str(e)
        if label is not None and msg.startswith("model: "):
            raise ModelError(f"{label}: {msg[len('model: '):]}") from None
        raise
    write_mjcf(base.root, out)
    return ExportResult(path=out, written=written, not_representable=lost)
