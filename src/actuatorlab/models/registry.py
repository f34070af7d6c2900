"""Registry of named, nested actuator models.

A model name is a base model optionally followed by extensions: ``m4``, ``m4+delay``,
``m6+delay+backlash``. Base models follow BAM's ladder (Duclusaud et al., ICRA 2025):

=====  ==========================================================================
m1     DC motor (kt, R) + armature + Coulomb + viscous
m2     m1 + Stribeck
m3     m1 + load-dependent Coulomb (grows with the torque through the gearbox)
m4     m2 + m3 + load-dependent Stribeck
m5     m4 with directional load friction, moving and at rest (driving vs backdriving efficiency)
m6     m5 + quadratic load terms at rest
g1     m1 + gear-mesh efficiency, driving vs backdriving (actuatorlab; see friction.py)
g2     g1 + Stribeck
=====  ==========================================================================

Extensions: ``delay`` (command delay), ``qoffset`` (encoder offset only, as BAM fits it), ``offset``
(encoder offset and bias effort; contains ``qoffset``), ``climit``
(firmware/driver current limit), ``sag`` (supply sag through a source resistance, solved with the
motor equation; see :func:`~actuatorlab.models.motor.sagged_supply_voltage`), ``stiction``
(gear-mesh breakaway at rest: extra loss s eta_s |tau_g| that fades with the Stribeck coefficient
s, see :func:`~actuatorlab.models.friction.friction_budget`), ``backlash`` (two-body
transmission with dead band and series stiffness), ``compliance`` (series stiffness without dead
band), ``gain`` (free firmware gain scale, for undocumented firmwares), ``thermal`` (winding
temperature state with R(T) and I^2 R heating; one joint: :mod:`actuatorlab.models.actuator`, whole robot:
:mod:`actuatorlab.sim.arm`).

Each model lists its free parameters; every other parameter keeps its neutral value, so a model
with more mechanisms contains its parent exactly (``parent`` is the model it extends).
Which parameters are free also depends on the drive: a current-mode drive (EMPS) has no kt/R.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UnknownNameError

__all__ = ["ModelSpec", "BASE_MODELS", "EXTENSIONS", "get_model", "list_models", "DEFAULT_LADDER",
           "SELECTION_EXTENSIONS",
           "parent_of", "contains", "embed_params", "tied_equivalents"]


@dataclass(frozen=True)
class ModelSpec:
    """A named nested model: its free parameters and static structure."""

    name: str
    free: tuple[str, ...]
    compliant: bool = False
    description: str = ""

    def free_for(self, drive: str) -> tuple[str, ...]:
        """Free parameters that matter for a drive type ("voltage", "current", "effort")."""
        motor = {"kt", "R", "current_limit", "source_resistance", "thermal_resistance", "thermal_capacitance"}
        return tuple(n for n in self.free if drive == "voltage" or n not in motor)

    @property
    def thermal(self) -> bool:
        """True when the model carries a winding temperature (``+thermal``)."""
        return "thermal" in self.extensions

    @property
    def base(self) -> str:
        return self.name.split("+")[0]

    @property
    def extensions(self) -> tuple[str, ...]:
        return tuple(self.name.split("+")[1:])


_M1 = ("kt", "R", "armature", "friction_base", "friction_viscous")
_STRIBECK = ("friction_stribeck", "stribeck_velocity", "stribeck_alpha")
_DIRECTIONAL = ("load_friction_motor", "load_friction_external")
_DIRECTIONAL_STRIBECK = ("load_friction_motor_stribeck", "load_friction_external_stribeck")
BASE_MODELS: dict[str, tuple[tuple[str, ...], str]] = {
    "m1": (_M1, "Coulomb + viscous"),
    "m2": (_M1 + _STRIBECK, "Stribeck"),
    "m3": (_M1 + ("load_friction",), "load-dependent"),
    "m4": (_M1 + _STRIBECK + ("load_friction", "load_friction_stribeck"), "Stribeck load-dependent"),
    "m5": (_M1 + _STRIBECK + _DIRECTIONAL + _DIRECTIONAL_STRIBECK, "Stribeck load-dependent directional"),
    "m6": (_M1 + _STRIBECK + _DIRECTIONAL + _DIRECTIONAL_STRIBECK
           + ("load_friction_motor_quad", "load_friction_external_quad"),
           "Stribeck load-dependent directional quadratic"),
    "g1": (_M1 + ("mesh_friction_drive", "mesh_friction_back"), "gear-mesh efficiency (driving/backdriving)"),
    "g2": (_M1 + _STRIBECK + ("mesh_friction_drive", "mesh_friction_back"), "gear-mesh efficiency + Stribeck"),
}

#: extension -> (extra free parameters, makes the transmission compliant, description)
EXTENSIONS: dict[str, tuple[tuple[str, ...], bool, str]] = {
    "delay": (("delay",), False, "command delay"),
    "qoffset": (("q_offset",), False, "encoder offset against the gravity vertical (BAM's q_offset)"),
    "offset": (("q_offset", "force_offset"), False, "encoder offset and constant bias effort"),
    "climit": (("current_limit",), False, "firmware/driver current limit"),
    "sag": (("source_resistance",), False, "supply sag through a source resistance"),
    "stiction": (("mesh_friction_static", "stribeck_velocity"), False,
                 "gear-mesh breakaway at rest, proportional to the transmitted torque"),
    "backlash": (("backlash", "stiffness"), True, "dead band + series stiffness (two bodies)"),
    "compliance": (("stiffness",), True, "series stiffness (two bodies)"),
    "gain": (("gain_scale",), False, "free firmware gain scale"),
    # ambient_temperature and resistance_tempco stay fixed: from positions alone the ambient
    # trades off against R, and copper's tempco is known
    "thermal": (("thermal_resistance", "thermal_capacitance"), False,
                "winding temperature: I^2 R heating, R(T)"),
}

#: The nested ladder fitted by ``actuatorlab fit`` without ``--model``: each entry extends an
#: earlier one, so each extension can be judged against its parent on validation data.
DEFAULT_LADDER: tuple[str, ...] = ("m1", "m2", "m3", "m4", "m5", "m6")

#: Extensions that ``actuatorlab fit`` (:func:`actuatorlab.identify.select.fit_family`) tries on top
#: of the best base models of the ladder, one at a time, then together when several earn their
#: place on the same base. A new extension joins the automatic selection by one entry here.
SELECTION_EXTENSIONS: tuple[str, ...] = ("offset", "delay", "climit", "sag")

_BASE_PARENT = {"m2": "m1", "m3": "m1", "m4": "m2", "m5": "m4", "m6": "m5", "g1": "m1", "g2": "g1"}


def list_models() -> list[str]:
    """Base model names and extension names (extensions combine with '+')."""
    return list(BASE_MODELS) + [f"+{e}" for e in EXTENSIONS]


def get_model(name: str) -> ModelSpec:
    """Look a model up by name (``m4``, ``m4+delay``, ...); errors list what exists."""
    parts = [s.strip() for s in name.strip().split("+")]
    base, exts = parts[0], parts[1:]
    if base not in BASE_MODELS:
        raise UnknownNameError("model", name, list_models())
    free = list(BASE_MODELS[base][0])
    desc = [BASE_MODELS[base][1]]
    compliant = False
    for e in exts:
        if e not in EXTENSIONS:
            raise UnknownNameError("model extension", e, list(EXTENSIONS))
        extra, comp, d = EXTENSIONS[e]
        free += [x for x in extra if x not in free]
        compliant |= comp
        desc.append(d)
    canonical = "+".join([base] + sorted(set(exts), key=list(EXTENSIONS).index))
    return ModelSpec(canonical, tuple(free), compliant, " + ".join(desc))


#: non-directional load-friction parameter -> the directional pair that expresses it
_TIED = {"load_friction": _DIRECTIONAL, "load_friction_stribeck": _DIRECTIONAL_STRIBECK}


def _expressible(spec: ModelSpec) -> set[str]:
    # non-directional load friction mu |tau_e - tau_m| is the directional one with mu_m = mu_e = mu
    # (at rest likewise: mu_s |tau_e - tau_m| with mu_ms = mu_es = mu_s)
    free = set(spec.free)
    return free | {k for k, pair in _TIED.items() if set(pair) <= free}


def tied_equivalents(names) -> set[str]:
    """The directional parameters that express the non-directional ones among ``names``
    (``load_friction`` -> the moving pair, ``load_friction_stribeck`` -> the at-rest pair)."""
    return {x for k, pair in _TIED.items() if k in names for x in pair}


def contains(outer: str, inner: str) -> bool:
    """True if model ``outer`` contains model ``inner`` exactly (``inner`` is ``outer`` with some
    mechanisms switched off or tied): free parameters are a subset up to the directional
    load-friction identity (see :func:`embed_params`) and the structure is no richer."""
    a, b = get_model(outer), get_model(inner)
    return (a.name != b.name and set(b.free) <= _expressible(a)
            and (a.compliant or not b.compliant))


def embed_params(params: dict[str, float], into: str) -> dict[str, float]:
    """Parameters of a contained model rewritten for model ``into`` with the same behaviour.

    A non-directional load friction mu becomes mu_m = mu_e = mu when ``into`` is directional, and
    its at-rest part mu_s becomes mu_ms = mu_es = mu_s.
    """
    spec = get_model(into)
    p = dict(params)
    for name, (motor, external) in _TIED.items():
        mu = p.get(name, 0.0)
        if mu and name not in spec.free and {motor, external} <= set(spec.free):
            p[name] = 0.0
            p[motor] = p.get(motor, 0.0) + mu
            p[external] = p.get(external, 0.0) + mu
    return p


def parent_of(name: str) -> str | None:
    """The model that ``name`` extends by one step (drop the last extension, or the base's parent)."""
    spec = get_model(name)
    if spec.extensions:
        return "+".join([spec.base] + list(spec.extensions[:-1]))
    return _BASE_PARENT.get(spec.base)
