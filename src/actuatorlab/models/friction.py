"""Friction: Coulomb, viscous, Stribeck, load-dependent and directional, with stick/slip.

The friction is a *budget* (maximum resisting effort) applied by :func:`stick_slip_torque`, which
clips the effort needed to stop the joint within one step: a joint at rest resists any net torque
below the budget (sticks), and friction can only bring the velocity towards zero, never reverse it,
so it never adds energy. This formulation follows BAM (Duclusaud et al., "Extended Friction Models
for the Physics Simulation of Servo Actuators", ICRA 2025), whose models M1..M6 are the special
cases listed in :mod:`actuatorlab.models.registry`.

Both functions take ``xp``, the array namespace (``jax.numpy`` by default; ``numpy`` in the native
MuJoCo rollout, :mod:`actuatorlab.sim.arm_native`): the same code runs on either.
"""

from __future__ import annotations

import jax.numpy as jnp

__all__ = ["friction_budget", "stick_slip_torque"]

_EPS = 1e-9


def friction_budget(p, tau_motor, tau_ext, dq, rotor_share=0.0, xp=jnp, tau_mesh=None):
    """Maximum friction effort [N.m] for the current state.

    s          = exp(-(|dq| / v_s)^alpha)                        Stribeck coefficient, 1 at rest
    tau_gb     = |tau_ext - tau_motor|                           torque through the gearbox
    tau_gb_dir = |mu_e tau_ext - mu_m tau_motor|                 directional (driving/backdriving)
    tau_gb_sdir = |mu_es tau_ext - mu_ms tau_motor|              directional, at rest
    F = F_c + s F_s                                              Coulomb + Stribeck
        + mu tau_gb + s mu_s tau_gb                              load-dependent (M3, M4)
        + tau_gb_dir + s tau_gb_sdir                             directional (M5)
        + s [q_m |tau_ext|^2 (|tau_ext| < |tau_motor|) + q_e |tau_motor|^2 (|tau_ext| > |tau_motor|)]
              * (tau_ext and tau_motor of opposite signs)        quadratic terms (BAM M6)
        + F_v |dq|                                               viscous
    Parameters at 0 switch their term off. With mu_m = mu_e = mu the directional term equals the
    non-directional one: driving and backdriving then lose the same fraction of the torque, which
    is what an asymmetric gearbox efficiency breaks.

    Gear-mesh efficiency (actuatorlab): the torque actually carried by the gear mesh is the motor
    torque minus what accelerates the rotor, tau_g = (1 - r) tau_motor - r tau_ext with
    r = J_rotor / (J_rotor + I_load) (``rotor_share``; rigid quasi-static estimate). Holding a
    load, tau_g = tau_motor; in free fall it is only the rotor's inertial torque r |tau_ext|,
    which BAM's |tau_ext - tau_motor| overstates. A two-body transmission passes the torque its
    mesh carries itself (``tau_mesh``, :func:`~actuatorlab.models.actuator.two_body_step`), which
    is then tau_g. The loss is
        + eta_d |tau_g|   when tau_g dq >= 0 (motor drives the load)
        + eta_b |tau_g|   otherwise (the load backdrives the motor)
    i.e. an efficiency 1 - eta_d driving and 1 - eta_b backdriving (Coulomb-like in each regime).

    Static gear-mesh friction (``+stiction``, actuatorlab): a mesh at rest needs more torque to
    break away than it loses sliding, in proportion to the torque it carries::

        + s eta_s |tau_g|                                  breakaway above the sliding mesh loss

    so a joint at rest holds while |tau_net| <= F_c + (eta + eta_s) |tau_g| (+ the other terms),
    and once it slides faster than v_s the extra loss fades with the same Stribeck coefficient s.
    This is the static-friction level of Armstrong-Helouvry's seven-parameter model (B.
    Armstrong-Helouvry, P. Dupont, C. Canudas de Wit, "A survey of models, analysis tools and
    compensation methods for the control of machines with friction", Automatica 30 (1994),
    static friction F_s > Coulomb F_c with the Stribeck curve between them) with the levels taken
    proportional to the transmitted load, as measured for gear meshes (the same survey, sec. 2:
    friction of lubricated contacts grows with normal force). It is even in (tau_m, tau_e, dq)
    like every budget term, so the stick/slip torque stays odd and dissipative.
    """
    adq = xp.abs(dq)
    s = xp.exp(-xp.power(adq / p["stribeck_velocity"] + _EPS, p["stribeck_alpha"]))
    tau_gb = xp.abs(tau_ext - tau_motor)
    tau_dir = xp.abs(p["load_friction_external"] * tau_ext - p["load_friction_motor"] * tau_motor)
    tau_sdir = xp.abs(p.get("load_friction_external_stribeck", 0.0) * tau_ext
                       - p.get("load_friction_motor_stribeck", 0.0) * tau_motor)
    opposite = (tau_ext * tau_motor) < 0.0
    quad = xp.where(xp.abs(tau_ext) < xp.abs(tau_motor),
                     p["load_friction_external_quad"] * tau_ext**2,
                     p["load_friction_motor_quad"] * tau_motor**2)
    coulomb = (p["friction_base"] + s * p["friction_stribeck"]
               + p["load_friction"] * tau_gb + s * p["load_friction_stribeck"] * tau_gb
               + tau_dir + s * tau_sdir + s * xp.where(opposite, quad, 0.0))
    tau_g = (1.0 - rotor_share) * tau_motor - rotor_share * tau_ext if tau_mesh is None else tau_mesh
    mesh = xp.abs(tau_g) * (xp.where(tau_g * dq >= 0.0, p["mesh_friction_drive"], p["mesh_friction_back"])
                             + s * p.get("mesh_friction_static", 0.0))
    return coulomb + mesh + p["friction_viscous"] * adq


def stick_slip_torque(inertia, dq, tau_net, budget, dt, xp=jnp):
    """Friction torque that at most stops the joint within one step (stick/slip).

    tau_stop = inertia * dq / dt + tau_net          effort that brings dq to 0 in one step
    tau_f    = -sign(tau_stop) * min(|tau_stop|, budget)
    Hence dq' = dq + (tau_net + tau_f) dt / inertia lies between 0 and the frictionless dq' with the
    same sign: friction dissipates and a resting joint holds |tau_net| <= budget.
    """
    tau_stop = inertia * dq / dt + tau_net
    return -xp.sign(tau_stop) * xp.minimum(xp.abs(tau_stop), budget)
