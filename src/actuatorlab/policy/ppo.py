"""Proximal policy optimization (PPO) in JAX for *policy environments* (docs/policy.md).

A compact PPO (Schulman et al. 2017, "Proximal Policy Optimization Algorithms", with generalized
advantage estimation, Schulman et al. 2016), written for environments that follow the policy
environment protocol: ``reset(rng, env_params) -> state`` and ``step(state, action, env_params)
-> state`` with ``state.obs``, ``state.reward``, ``state.done``, ``state.metrics`` and
``state.info["truncation"]``.

One *update* collects ``unroll_length`` steps from each of ``num_envs`` environments (``vmap`` over
the batch, ``lax.scan`` over time), updates the running observation statistics, computes GAE and
runs ``num_epochs`` passes of ``num_minibatches`` clipped-surrogate steps (Adam with global-norm
gradient clipping and an optional linear learning-rate decay). :meth:`PPO.train_chunk` runs
``n`` updates inside one jitted ``lax.scan``; ``env_params`` (the homotopy's ``alpha``) is a jit
*argument*, so changing it never recompiles (``PPO.traces`` counts the traces).

Policy: a Gaussian with state-independent standard deviation whose sample is *clipped* to
[-1, 1] before it reaches the environment (log-probabilities are those of the unclipped sample);
the deterministic policy is the clipped mean. Actor and critic are separate equinox MLPs on
observations normalized by running mean and variance (clipped to +-5 standard deviations).

Asymmetric actor-critic: an environment with ``privileged_size`` > 0 returns ``state.privileged``
(privileged_size,), quantities a robot does not measure (e.g. the trunk's true linear velocity);
the critic sees ``[obs, privileged]``, the actor ``obs`` only, so the policy can be deployed on
the robot's sensors while its value function still sees the state (Pinto et al. 2018, "Asymmetric
Actor Critic for Image-Based Robot Learning"; MuJoCo Playground's locomotion tasks train so). The
running statistics cover ``[obs, privileged]``; the actor uses their first ``observation_size``
entries.

Advantages (per step t of one environment, gamma = ``discount``, lambda = ``gae_lambda``)::

    delta_t = r_t + gamma * (1 - terminated_t) * V(s'_t) - V(s_t)
    A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1},        A_T = 0

with ``s'_t`` the observation *returned by the step* (before the auto-reset), so an episode cut
by the time limit (``truncation``: done but not terminated) bootstraps from the value of its last
state, and a terminated one does not; ``done_t`` stops the recursion at every episode boundary.
Value targets are ``A_t + V(s_t)``.

Learning rate: constant, linear decay, or *adaptive* (``lr_schedule="adaptive"``, as rsl_rl's PPO
that Isaac Lab's and legged_gym's locomotion policies train with; the adaptive-KL idea of Schulman
et al. 2017, section 4, applied to the step size): after every minibatch step the KL divergence of
the new policy from the collecting one over the minibatch's samples (closed form for two Gaussians
with diagonal covariance, summed over action dimensions, averaged over samples)::

    KL = sum_i [ log s1_i - log s0_i + (s0_i^2 + (m0_i - m1_i)^2) / (2 s1_i^2) - 1/2 ]
    lr <- lr / 1.5   if KL > 2 desired_kl;     lr <- 1.5 lr   if KL < desired_kl / 2

clipped to ``lr_bounds``; the step size lives in the optimizer state (``optax.inject_hyperparams``),
so it is checkpointed and resumed with it.

Auto-reset: at the start of every update one fresh reset state per environment is drawn (new
keys, the current ``env_params``); an environment that finishes during the update continues from
its fresh state (the cost of one reset per environment and update instead of one per step).

All arrays are float32 whatever JAX's x64 mode (docs/policy.md, precision).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from ..errors import ModelError, UnknownNameError

__all__ = ["PPOConfig", "PPO", "TrainState", "RunningStats", "ActorCritic", "gae", "update_stats", "actor_stats",
           "normalize", "policy_action"]

F32 = jnp.float32
_ACTIVATIONS: dict[str, Callable] = {"tanh": jnp.tanh, "swish": jax.nn.swish, "relu": jax.nn.relu,
                                     "elu": jax.nn.elu}
_LR_SCHEDULES = ("constant", "linear", "adaptive")


@dataclass(frozen=True)
class PPOConfig:
    """Hyper-parameters of :class:`PPO` (defaults suit small tasks; docs/policy.md lists the
    locomotion ones)."""

    num_envs: int = 64                 #: environments stepped in parallel (vmap)
    unroll_length: int = 16            #: steps per environment and update
    num_minibatches: int = 4           #: minibatches per epoch (num_envs * unroll_length must divide)
    num_epochs: int = 4                #: passes over one update's data
    learning_rate: float = 3e-4        #: Adam step size (initial one with lr_schedule="linear" / "adaptive")
    lr_schedule: str = "constant"      #: "constant", "linear" (to lr_final_fraction * lr at the end) or
                                       #: "adaptive" (kept near desired_kl, module docstring)
    lr_final_fraction: float = 0.1     #: final / initial learning rate of the linear schedule
    desired_kl: float = 0.01           #: target KL per minibatch step of the adaptive schedule
    lr_bounds: tuple[float, float] = (1e-5, 1e-2)   #: learning-rate range of the adaptive schedule
    discount: float = 0.97             #: gamma
    gae_lambda: float = 0.95           #: lambda of GAE
    clip_eps: float = 0.2              #: PPO ratio clip
    value_clip: float | None = None    #: clip of the value change per update (None: no clipping)
    vf_coef: float = 0.5               #: weight of the value loss
    entropy_cost: float = 1e-3         #: weight of the entropy bonus
    max_grad_norm: float = 1.0         #: global gradient-norm clip
    reward_scaling: float = 1.0        #: rewards are multiplied by this for learning (not in metrics)
    normalize_obs: bool = True         #: running mean / variance normalization of observations
    policy_hidden: tuple[int, ...] = (64, 64)   #: hidden layer widths of the actor (all equal)
    value_hidden: tuple[int, ...] = (64, 64)    #: hidden layer widths of the critic (all equal)
    activation: str = "tanh"           #: "tanh", "swish", "relu" or "elu"
    init_log_std: float = -0.5         #: initial log standard deviation of the actions

    def __post_init__(self):
        if self.activation not in _ACTIVATIONS:
            raise UnknownNameError("activation", self.activation, list(_ACTIVATIONS))
        if self.lr_schedule not in _LR_SCHEDULES:
            raise UnknownNameError("learning-rate schedule", self.lr_schedule, list(_LR_SCHEDULES))
        for name in ("num_envs", "unroll_length", "num_minibatches", "num_epochs"):
            if int(getattr(self, name)) < 1:
                raise ModelError(f"PPO config: {name} must be >= 1, got {getattr(self, name)}")
        if (self.num_envs * self.unroll_length) % self.num_minibatches:
            raise ModelError(f"PPO config: num_envs * unroll_length = {self.num_envs * self.unroll_length} "
                             f"is not divisible by num_minibatches = {self.num_minibatches}")
        lo, hi = (float(x) for x in self.lr_bounds)
        if not 0 < lo <= hi or self.desired_kl <= 0:
            raise ModelError(f"PPO config: need 0 < lr_bounds[0] <= lr_bounds[1] and desired_kl > 0, got "
                             f"lr_bounds={self.lr_bounds}, desired_kl={self.desired_kl}")
        object.__setattr__(self, "lr_bounds", (lo, hi))
        for name in ("policy_hidden", "value_hidden"):
            h = tuple(getattr(self, name))
            if not h or len(set(h)) != 1:
                raise ModelError(f"PPO config: {name} must be equal widths, e.g. (64, 64), got {h}")
            object.__setattr__(self, name, tuple(int(x) for x in h))

    @property
    def steps_per_update(self) -> int:
        """Environment steps per update (num_envs * unroll_length)."""
        return self.num_envs * self.unroll_length

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["policy_hidden"], d["value_hidden"] = list(self.policy_hidden), list(self.value_hidden)
        d["lr_bounds"] = list(self.lr_bounds)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PPOConfig":
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        for k in ("policy_hidden", "value_hidden", "lr_bounds"):
            if k in known:
                known[k] = tuple(known[k])
        return cls(**known)


class RunningStats(NamedTuple):
    """Running mean and variance of observations (parallel Welford), float32."""

    mean: jax.Array    # (obs_size,)
    var: jax.Array     # (obs_size,) population variance
    n_seen: jax.Array  # () number of observations seen (not `count`: tuple.count is a method)


def update_stats(stats: RunningStats, batch: jax.Array) -> RunningStats:
    """Fold ``batch`` (N, obs_size) into ``stats`` (Chan et al.'s parallel variance update)."""
    batch = batch.astype(F32)
    n = jnp.asarray(batch.shape[0], F32)
    b_mean = batch.mean(0)
    b_var = batch.var(0)
    tot = stats.n_seen + n
    delta = b_mean - stats.mean
    mean = stats.mean + delta * (n / tot)
    m2 = stats.var * stats.n_seen + b_var * n + delta ** 2 * (stats.n_seen * n / tot)
    return RunningStats(mean, m2 / tot, tot)


def normalize(stats: RunningStats, obs: jax.Array, enabled: bool = True) -> jax.Array:
    """``(obs - mean) / std`` clipped to +-5 (identity when not ``enabled``)."""
    obs = obs.astype(F32)
    if not enabled:
        return obs
    return jnp.clip((obs - stats.mean) / jnp.sqrt(stats.var + 1e-6), -5.0, 5.0)


class ActorCritic(eqx.Module):
    """Actor MLP (mean action), critic MLP (value) and a state-independent log std, float32."""

    actor: eqx.nn.MLP
    critic: eqx.nn.MLP
    log_std: jax.Array   # (action_size,)

    def __init__(self, obs_size: int, action_size: int, cfg: PPOConfig, key, privileged_size: int = 0):
        ka, kc = jax.random.split(key)
        act = _ACTIVATIONS[cfg.activation]
        self.actor = eqx.nn.MLP(obs_size, action_size, cfg.policy_hidden[0], len(cfg.policy_hidden),
                                activation=act, key=ka, dtype=F32)
        # small last layer: initial actions near 0 whatever the observation
        last = self.actor.layers[-1]
        assert last.bias is not None, "eqx.nn.MLP layers have biases (use_final_bias defaults to True)"
        self.actor = eqx.tree_at(lambda m: (m.layers[-1].weight, m.layers[-1].bias), self.actor,
                                 (last.weight * 0.01, jnp.zeros_like(last.bias)))
        self.critic = eqx.nn.MLP(obs_size + privileged_size, "scalar", cfg.value_hidden[0], len(cfg.value_hidden),
                                 activation=act, key=kc, dtype=F32)
        self.log_std = jnp.full((action_size,), cfg.init_log_std, F32)


def _gauss_logp(x, mean, log_std):
    return jnp.sum(-0.5 * ((x - mean) / jnp.exp(log_std)) ** 2 - log_std - 0.5 * math.log(2 * math.pi), axis=-1)


def actor_stats(stats: RunningStats, obs_size: int) -> RunningStats:
    """The statistics of the actor's observation: the first ``obs_size`` entries (the rest are the
    critic's privileged inputs)."""
    if stats.mean.shape[-1] == obs_size:
        return stats
    return RunningStats(stats.mean[..., :obs_size], stats.var[..., :obs_size], stats.n_seen)


def policy_action(model: ActorCritic, stats: RunningStats, obs: jax.Array, normalize_obs: bool = True) -> jax.Array:
    """Deterministic action of one observation: the clipped mean, in [-1, 1]."""
    return jnp.clip(model.actor(normalize(actor_stats(stats, obs.shape[-1]), obs, normalize_obs)), -1.0, 1.0)


def gae(reward, value, next_value, terminated, done, discount: float, lam: float):
    """Generalized advantage estimates and value targets along the leading (time) axis.

    ``reward``, ``value`` = V(s_t), ``next_value`` = V(s'_t) (the step's own next state, before
    any reset), ``terminated`` and ``done`` (0/1, done = terminated or truncated): arrays (T, ...).
    Returns ``(advantages, targets)`` with the recursion of the module docstring."""
    delta = reward + discount * (1.0 - terminated) * next_value - value

    def body(adv_next, x):
        d, dn = x
        adv = d + discount * lam * (1.0 - dn) * adv_next
        return adv, adv

    _, adv = jax.lax.scan(body, jnp.zeros_like(delta[0]), (delta, done), reverse=True)
    return adv, adv + value


class EpisodeState(NamedTuple):
    """Batched environment state plus per-environment episode bookkeeping and keys."""

    env: Any            # the environment's state, batched (num_envs, ...)
    ep_return: jax.Array   # (num_envs,) undiscounted return of the running episode
    ep_length: jax.Array   # (num_envs,) steps of the running episode


class TrainState(NamedTuple):
    """Everything an exact resume needs (a pytree of arrays; ``None`` for static leaves)."""

    params: Any              # ActorCritic's arrays (eqx.filter(model, eqx.is_array))
    opt_state: Any           # optax state (holds the learning-rate schedule's count)
    stats: RunningStats      # observation normalization
    episodes: EpisodeState   # the environments
    key: jax.Array           # PRNG key (uint32 raw key)
    update: jax.Array        # () int32 updates done


def _where(c, a, b):
    return jax.tree_util.tree_map(lambda x, y: jnp.where(c.reshape(c.shape + (1,) * (x.ndim - c.ndim)), x, y), a, b)


class PPO:
    """PPO for one policy environment and config; ``total_updates`` sets the learning-rate decay.

    >>> ppo = PPO(env, PPOConfig(num_envs=32), total_updates=100)     # doctest: +SKIP
    >>> state = ppo.init(jax.random.PRNGKey(0), env.default_env_params())
    >>> state, metrics = ppo.train_chunk(state, env_params, 10)       # 10 updates, one jit call
    """

    def __init__(self, env: Any, config: PPOConfig, total_updates: int):
        self.env, self.cfg = env, config
        self.obs_size, self.action_size = int(env.observation_size), int(env.action_size)
        self.privileged_size = int(getattr(env, "privileged_size", 0))
        self.total_updates = max(int(total_updates), 1)
        like = ActorCritic(self.obs_size, self.action_size, config, jax.random.PRNGKey(0), self.privileged_size)
        _, self._static = eqx.partition(like, eqx.is_array)
        steps = self.total_updates * config.num_epochs * config.num_minibatches
        if config.lr_schedule == "linear":
            lr = optax.linear_schedule(config.learning_rate, config.learning_rate * config.lr_final_fraction, steps)
        else:
            lr = config.learning_rate
        self._lr = lr
        if config.lr_schedule == "adaptive":   # the step size is optimizer state, changed by _adapt_lr
            self.optimizer = optax.inject_hyperparams(
                lambda learning_rate: optax.chain(optax.clip_by_global_norm(config.max_grad_norm),
                                                  optax.adam(learning_rate)))(learning_rate=jnp.asarray(lr, F32))
        else:
            self.optimizer = optax.chain(optax.clip_by_global_norm(config.max_grad_norm), optax.adam(lr))
        self._reset_jit = jax.jit(self._reset_batch)
        self.traces = 0   # how many times train_chunk was traced (a new alpha must not add one)
        self._chunks: dict[int, Callable] = {}

    # ------------------------------------------------------------------ building blocks
    def model(self, params) -> ActorCritic:
        return eqx.combine(params, self._static)

    def _reset_batch(self, key, env_params):
        keys = jax.random.split(key, self.cfg.num_envs)
        return jax.vmap(self.env.reset, in_axes=(0, None))(keys, env_params)

    def init(self, key, env_params) -> TrainState:
        """Fresh networks, optimizer, statistics and environments (``key``: a PRNGKey)."""
        k_model, k_env, k_next = jax.random.split(key, 3)
        model = ActorCritic(self.obs_size, self.action_size, self.cfg, k_model, self.privileged_size)
        params = eqx.filter(model, eqx.is_array)
        n_in = self.obs_size + self.privileged_size
        stats = RunningStats(jnp.zeros((n_in,), F32), jnp.ones((n_in,), F32), jnp.zeros((), F32))
        env = self._reset_jit(k_env, env_params)
        n = self.cfg.num_envs
        eps = EpisodeState(env, jnp.zeros((n,), F32), jnp.zeros((n,), F32))
        return TrainState(params, self.optimizer.init(params), stats, eps, k_next, jnp.zeros((), jnp.int32))

    def _rollout(self, params, stats, eps: EpisodeState, env_params, key):
        cfg = self.cfg
        model = self.model(params)
        k_reset, k_steps = jax.random.split(key)
        fresh = self._reset_batch(k_reset, env_params)
        step = jax.vmap(self.env.step, in_axes=(0, 0, None))

        def body(e: EpisodeState, k):
            obs = e.env.obs.astype(F32)
            mean = jax.vmap(model.actor)(normalize(actor_stats(stats, self.obs_size), obs, cfg.normalize_obs))
            raw = mean + jnp.exp(model.log_std) * jax.random.normal(k, mean.shape, F32)
            logp = _gauss_logp(raw, mean, model.log_std)
            s = step(e.env, jnp.clip(raw, -1.0, 1.0), env_params)
            reward = s.reward.astype(F32)
            done = s.done.astype(F32)
            trunc = s.info["truncation"].astype(F32) * done
            ret, length = e.ep_return + reward, e.ep_length + 1.0
            out = {"obs": obs, "action": raw, "logp": logp, "reward": reward, "done": done,
                   "terminated": done * (1.0 - trunc), "next_cobs": self._critic_input(s),
                   "ep_return": ret * done, "ep_length": length * done,
                   "metrics": {k: v.astype(F32) for k, v in s.metrics.items()}}
            if self.privileged_size:
                out["cobs"] = self._critic_input(e.env)
            if cfg.lr_schedule == "adaptive":   # the collecting policy's mean, for the closed-form KL
                out["mean"] = mean
            nxt = EpisodeState(_where(done > 0.5, fresh, s), ret * (1.0 - done), length * (1.0 - done))
            return nxt, out

        return jax.lax.scan(body, eps, jax.random.split(k_steps, cfg.unroll_length))

    def _critic_input(self, state) -> jax.Array:
        """[obs, privileged] of a (batched) environment state: the critic's input."""
        obs = state.obs.astype(F32)
        if not self.privileged_size:
            return obs
        return jnp.concatenate([obs, state.privileged.astype(F32)], axis=-1)

    def _loss(self, params, stats, batch):
        cfg = self.cfg
        model = self.model(params)
        x = normalize(actor_stats(stats, self.obs_size), batch["obs"], cfg.normalize_obs)
        mean = jax.vmap(model.actor)(x)
        value = jax.vmap(model.critic)(normalize(stats, batch["cobs"], cfg.normalize_obs) if self.privileged_size
                                       else x)
        logp = _gauss_logp(batch["action"], mean, model.log_std)
        ratio = jnp.exp(logp - batch["logp"])
        adv = batch["adv"]
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        pg = -jnp.mean(jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - cfg.clip_eps, 1 + cfg.clip_eps) * adv))
        err = (value - batch["target"]) ** 2
        if cfg.value_clip is not None:
            v_clip = batch["value"] + jnp.clip(value - batch["value"], -cfg.value_clip, cfg.value_clip)
            err = jnp.maximum(err, (v_clip - batch["target"]) ** 2)
        v_loss = 0.5 * jnp.mean(err)
        entropy = jnp.sum(model.log_std + 0.5 * math.log(2 * math.pi * math.e))
        loss = pg + cfg.vf_coef * v_loss - cfg.entropy_cost * entropy
        aux = {"policy_loss": pg, "value_loss": v_loss, "entropy": entropy,
               "approx_kl": jnp.mean((ratio - 1.0) - jnp.log(ratio)),
               "clip_fraction": jnp.mean((jnp.abs(ratio - 1.0) > cfg.clip_eps).astype(F32))}
        return loss, aux

    def _kl(self, params, stats, batch):
        """Mean KL(pi_old || pi_new) of a minibatch's samples, Gaussian in closed form: the old
        policy's mean and log std were stored at collection time."""
        model = self.model(params)
        mean = jax.vmap(model.actor)(normalize(actor_stats(stats, self.obs_size), batch["obs"], self.cfg.normalize_obs))
        ls0, ls1 = batch["log_std"], model.log_std
        kl = ls1 - ls0 + (jnp.exp(2 * ls0) + (batch["mean"] - mean) ** 2) / (2 * jnp.exp(2 * ls1)) - 0.5
        return jnp.mean(jnp.sum(kl, axis=-1))

    def _adapt_lr(self, opt_state, kl):
        """Adaptive step size (as rsl_rl's PPO, after Schulman et al. 2017's adaptive-KL variant):
        divide the learning rate by 1.5 when the minibatch step's KL exceeds 2 desired_kl, multiply
        it by 1.5 when the KL is below desired_kl / 2, within lr_bounds."""
        cfg = self.cfg
        lr = opt_state.hyperparams["learning_rate"]
        lr = jnp.where(kl > 2.0 * cfg.desired_kl, lr / 1.5, jnp.where(kl < 0.5 * cfg.desired_kl, lr * 1.5, lr))
        lr = jnp.clip(lr, cfg.lr_bounds[0], cfg.lr_bounds[1]).astype(F32)
        return opt_state._replace(hyperparams={**opt_state.hyperparams, "learning_rate": lr})

    def learning_rate(self, opt_state) -> jax.Array:
        """The current learning rate (every schedule)."""
        cfg = self.cfg
        if cfg.lr_schedule == "adaptive":
            return opt_state.hyperparams["learning_rate"]
        if callable(self._lr):   # the linear schedule, at adam's step count
            return jnp.asarray(self._lr(opt_state[1][0].count), F32)
        return jnp.asarray(self._lr, F32)

    def _update(self, ts: TrainState, env_params):
        cfg = self.cfg
        key, k_roll, k_perm = jax.random.split(ts.key, 3)
        eps, tr = self._rollout(ts.params, ts.stats, ts.episodes, env_params, k_roll)
        cobs = tr["cobs"] if self.privileged_size else tr["obs"]
        n_in = self.obs_size + self.privileged_size
        stats = update_stats(ts.stats, cobs.reshape(-1, n_in)) if cfg.normalize_obs else ts.stats
        model = self.model(ts.params)
        critic = jax.vmap(jax.vmap(model.critic))
        value = critic(normalize(stats, cobs, cfg.normalize_obs))
        next_value = critic(normalize(stats, tr["next_cobs"], cfg.normalize_obs))
        adv, target = gae(tr["reward"] * cfg.reward_scaling, value, next_value, tr["terminated"], tr["done"],
                          cfg.discount, cfg.gae_lambda)
        n = cfg.steps_per_update
        data = {"obs": tr["obs"].reshape(n, -1), "action": tr["action"].reshape(n, -1), "logp": tr["logp"].reshape(n),
                "adv": adv.reshape(n), "target": target.reshape(n), "value": value.reshape(n)}
        if self.privileged_size:
            data["cobs"] = cobs.reshape(n, -1)
        if cfg.lr_schedule == "adaptive":   # the collecting policy, for the closed-form KL
            data["mean"] = tr["mean"].reshape(n, -1)
            data["log_std"] = jnp.broadcast_to(model.log_std, (n, self.action_size))
        grad_fn = jax.value_and_grad(self._loss, has_aux=True)

        def minibatch(carry, mb):
            params, opt_state = carry
            (_, aux), grads = grad_fn(params, stats, mb)
            upd, opt_state = self.optimizer.update(grads, opt_state, params)
            aux["grad_norm"] = optax.tree.norm(grads)
            params = eqx.apply_updates(params, upd)
            if cfg.lr_schedule == "adaptive":
                kl = self._kl(params, stats, mb)
                opt_state = self._adapt_lr(opt_state, kl)
                aux["kl"] = kl
            aux["learning_rate"] = self.learning_rate(opt_state)
            return (params, opt_state), aux

        def epoch(carry, k):
            perm = jax.random.permutation(k, n)
            mbs = jax.tree_util.tree_map(lambda a: a[perm].reshape((cfg.num_minibatches, -1) + a.shape[1:]), data)
            return jax.lax.scan(minibatch, carry, mbs)

        (params, opt_state), aux = jax.lax.scan(epoch, (ts.params, ts.opt_state),
                                                jax.random.split(k_perm, cfg.num_epochs))
        metrics = {k: v.mean() for k, v in aux.items()}
        metrics.update({"reward": tr["reward"].mean(), "episodes": tr["done"].sum(),
                        "episode_return_sum": tr["ep_return"].sum(), "episode_length_sum": tr["ep_length"].sum(),
                        "terminations": tr["terminated"].sum()})
        # per-step means over finite values (a diverged environment ends its episode at that step)
        metrics.update({f"env/{k}": jnp.sum(jnp.where(jnp.isfinite(v), v, 0.0)) / jnp.maximum(jnp.sum(jnp.isfinite(v)), 1)
                        for k, v in tr["metrics"].items()})
        return TrainState(params, opt_state, stats, eps, key, ts.update + 1), metrics

    def train_chunk(self, ts: TrainState, env_params, n: int):
        """``n`` updates in one jitted call; returns the new state and per-update metrics (n,)."""
        n = int(n)
        if n not in self._chunks:
            def chunk(ts, env_params):
                self.traces += 1
                return jax.lax.scan(lambda s, _: self._update(s, env_params), ts, None, length=n)
            self._chunks[n] = jax.jit(chunk)
        return self._chunks[n](ts, env_params)
