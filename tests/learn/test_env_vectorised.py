"""Every environment takes Gymnasium's ``render_mode`` and is made by id by the standard
vectorising helpers: Stable-Baselines3's ``make_vec_env`` (``DummyVecEnv``, and
``SubprocVecEnv``), Gymnasium's ``make_vec`` (sync and async), and a few steps of plain PPO
train on each, the environment handling the actions a mask would have forbidden (issue #48).

``make_vec_env`` asks for ``render_mode="rgb_array"`` unless told otherwise, which is why
every environment draws an image as well as text."""

from __future__ import annotations

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")

import dcsim  # noqa: E402,F401  (registers the ids where the start-up file is absent)
from dcsim.errors import ConfigError  # noqa: E402

#: small settings per id: a step is milliseconds
SMALL = {
    "dcsim/Nara-v0": {"requests": 8},
    "dcsim/VMR2L-v0": {"preset": "small", "mnl": 4},
    "dcsim/VMR2L-TwoStep-v0": {"preset": "small", "mnl": 4},
}
IDS = list(SMALL)


def _classes():
    from dcsim.learn.nara.env import NaraEnv
    from dcsim.learn.vmr2l.env import VMR2LEnv, VMR2LTwoStepEnv

    return {"dcsim/Nara-v0": NaraEnv, "dcsim/VMR2L-v0": VMR2LEnv,
            "dcsim/VMR2L-TwoStep-v0": VMR2LTwoStepEnv}


def _legal(env) -> object:
    """An action the environment's masks allow (a real move for ``dcsim/VMR2L-v0``)."""
    u = env.unwrapped
    if hasattr(u, "action_masks"):
        return int(np.flatnonzero(u.action_masks())[-1])
    for token in range(len(u.tokens)):
        slots = u.slot_mask(token)
        slots[2 * int(u.state.vm_host[u.tokens[token]])] = False   # not its own host
        if slots.any():
            return np.array([token, int(np.flatnonzero(slots)[0])])
    raise AssertionError("no VM can move")


# ------------------------------------------------------------------ render_mode
@pytest.mark.parametrize("env_id", IDS)
def test_every_environment_declares_ansi_and_rgb_array_and_accepts_render_mode_none(env_id):
    env = gym.make(env_id, render_mode=None, **SMALL[env_id])
    assert env.unwrapped.metadata["render_modes"] == ["ansi", "rgb_array"]
    assert env.render_mode is None
    env.reset(seed=0)
    assert env.unwrapped.render() is None
    assert _classes()[env_id](render_mode=None, **SMALL[env_id]).render_mode is None


def test_nara_ansi_render_says_the_time_utilisation_per_resource_and_the_pending_request():
    env = gym.make("dcsim/Nara-v0", render_mode="ansi", **SMALL["dcsim/Nara-v0"])
    env.reset(seed=0)
    first = env.render()
    assert isinstance(first, str)
    assert first.startswith("dcsim/Nara-v0  t=1  topology 0 (fabric-alpha, 40 servers)")
    assert "requests: 1 of 8 arrived, 0 decided, 0 placed" in first
    assert "utilisation: cpu 0.0%  mem 0.0%  links 0.0%" in first
    assert "pending: request 0 (demand cpu 43 mem 9" in first
    assert "servers chosen: none yet; remaining cpu 43 mem 9; the mask offers 40 of 40" in first
    env.step(_legal(env))
    assert "servers chosen: 39; remaining cpu 33 mem 0" in env.render()
    done = False
    while not done:
        done = env.step(_legal(env))[2]
    last = env.render()
    assert "requests: 8 of 8 arrived, 8 decided" in last
    assert "pending: nothing (the episode is over after 8 decisions)" in last
    assert "utilisation: cpu 0.0%" not in last


def test_vmr2l_ansi_render_says_the_step_fragment_utilisation_and_the_last_move():
    env = gym.make("dcsim/VMR2L-v0", render_mode="ansi", **SMALL["dcsim/VMR2L-v0"])
    env.reset(seed=1)
    text = env.render()
    assert text.startswith("dcsim/VMR2L-v0  step 0 of 4 (4 to go)  8 hosts, ")
    assert "fragment: " in text and "utilisation: cpu 94.3%  mem 46.1%" in text
    assert "last step: none yet" in text
    env.step(_legal(env))
    assert "step 1 of 4 (3 to go)" in env.render()
    assert "last step: VM vm-00006 moved host-0002/0 -> host-0000/0, fragment 40 -> 40" \
        in env.render()
    env.step(np.array([127, 0]))   # no such token: a no-op
    assert "last step: an action the masks forbid (a no-op)" in env.render()


def test_twostep_ansi_render_says_which_stage_is_pending_and_the_chosen_vm():
    env = gym.make("dcsim/VMR2L-TwoStep-v0", render_mode="ansi",
                   **SMALL["dcsim/VMR2L-TwoStep-v0"])
    env.reset(seed=1)
    assert env.render().startswith("dcsim/VMR2L-TwoStep-v0  step 0 of 4")
    assert env.render().endswith("pending: the VM stage (choose a VM token)\n")
    env.step(_legal(env))
    assert "pending: the slot stage for VM vm-00051 (token 51, on host-0001/1): 4 legal " \
        "slots" in env.render()
    env.step(_legal(env))
    text = env.render()
    assert "step 1 of 4" in text and "last step: VM vm-00051 moved host-0001/1 ->" in text
    assert text.endswith("pending: the VM stage (choose a VM token)\n")


@pytest.mark.parametrize("env_id", IDS)
def test_rgb_array_render_is_one_image_size_per_environment_and_shows_the_moves(env_id):
    """uint8 height × width × 3, the same size at every step and for every copy (what
    ``VecEnv.render()`` tiles and a video records), drawn anew after a move."""
    env = gym.make(env_id, render_mode="rgb_array", **SMALL[env_id])
    env.reset(seed=1)
    before = env.render()
    assert before.dtype == np.uint8 and before.ndim == 3 and before.shape[2] == 3
    env.step(_legal(env))
    if env_id.endswith("TwoStep-v0"):
        env.step(_legal(env))   # the slot: the migration is made
    after = env.render()
    assert after.shape == before.shape and not np.array_equal(after, before)
    other = gym.make(env_id, render_mode="rgb_array", **SMALL[env_id])
    other.reset(seed=5)
    assert other.render().shape == before.shape


def test_rgb_array_image_has_a_bar_per_server_and_resource():
    """Nara's image: a column group per action index (server), a bar per resource as tall as
    its used fraction, the servers the mask offers marked green."""
    from dcsim.environments import bars_image

    img = bars_image(np.array([[0.5, 1.0], [0.0, 0.0], [np.nan, np.nan]]), [1, 2, 0])
    assert img.shape == (70, 3 * 5 + 1, 3)
    blue, orange = (31, 119, 180), (255, 127, 14)
    column = img[:64, 1]                         # unit 0's first bar (cpu, half full)
    assert (column[32:] == blue).all() and (column[:32] == 225).all()
    assert (img[:64, 3] == orange).all()         # unit 0's mem bar: full
    assert (img[65:69, 1] == (44, 160, 44)).all() and (img[65:69, 6] == (40, 40, 40)).all()
    assert (img[:, 11:] == 255).all()            # unit 2 is padding: blank


@pytest.mark.filterwarnings("ignore:.*not in the possible render_modes")
@pytest.mark.parametrize("mode", ["human", "rgb", "ANSI", 3])
@pytest.mark.parametrize("env_id", IDS)
def test_an_unsupported_render_mode_is_one_config_error_naming_the_supported_ones(env_id,
                                                                                  mode):
    match = (rf"{env_id}: render_mode {mode!r} is not supported \(.*\); supported: None, "
             r"'ansi', 'rgb_array'$")
    with pytest.raises(ConfigError, match=match):
        _classes()[env_id](render_mode=mode, **SMALL[env_id])
    # gym.make turns "human" into its own window over the image, and reads a mode as text
    if isinstance(mode, str) and mode != "human":
        with pytest.raises(ConfigError, match=match):
            gym.make(env_id, render_mode=mode, **SMALL[env_id])


@pytest.mark.filterwarnings("ignore:.*HumanRendering wrapper is being applied")
def test_human_through_gym_make_is_gymnasiums_window_over_the_image():
    env = gym.make("dcsim/Nara-v0", render_mode="human", requests=4)
    assert env.unwrapped.render_mode == "rgb_array" and type(env).__name__ == "HumanRendering"


@pytest.mark.parametrize("env_id", IDS)
def test_a_list_render_mode_collects_every_frame(env_id):
    """Gymnasium's ``ansi_list`` / ``rgb_array_list`` (its RenderCollection wrapper)."""
    env = gym.make(env_id, render_mode="ansi_list", **SMALL[env_id])
    env.reset(seed=0)
    env.step(_legal(env))
    frames = env.render()
    assert len(frames) == 2 and all(isinstance(f, str) for f in frames)


@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize("mode", ["ansi", "rgb_array"])
def test_gymnasium_check_env_passes_with_each_render_mode(env_id, mode):
    from gymnasium.utils.env_checker import check_env

    # made by id, so that the checker also makes copies in the other render modes
    check_env(gym.make(env_id, render_mode=mode, **SMALL[env_id]).unwrapped)


# ------------------------------------------------------------------ other keywords
@pytest.mark.parametrize(("env_id", "typo"), [
    ("dcsim/Nara-v0", "rqeuests"), ("dcsim/VMR2L-v0", "hsts"),
    ("dcsim/VMR2L-TwoStep-v0", "mnnl")])
def test_a_misspelt_setting_is_still_refused_naming_it(env_id, typo):
    with pytest.raises(ConfigError, match=rf"^env\.{typo}: unknown field$"):
        gym.make(env_id, render_mode="ansi", **{typo: 3})
    with pytest.raises(ConfigError, match=rf"^env\.{typo}: unknown field$"):
        _classes()[env_id](**{typo: 3})


def test_vmr2l_settings_over_a_config_object_are_validated():
    """``VMR2LEnv(config, **overrides)``: the overrides are checked like keyword settings
    (before, ``model_copy`` took a typo or an invalid value silently)."""
    from dcsim.learn.vmr2l.env import VMR2LEnv, VMR2LEnvConfig

    base = VMR2LEnvConfig(preset="small")
    env = VMR2LEnv(base, mnl=3, hosts=(4, 6), render_mode="ansi")
    assert (env.config.mnl, env.config.host_range, env.config.preset) == (3, (4, 6), "small")
    assert env.render_mode == "ansi" and VMR2LEnv(base).config is base
    with pytest.raises(ConfigError, match=r"^env\.mnll: unknown field$"):
        VMR2LEnv(base, mnll=3)
    with pytest.raises(ConfigError, match=r"^env\.mnl: Input should be greater than or"):
        VMR2LEnv(base, mnl=0)
    with pytest.raises(ConfigError, match=r"^env\.preset: unknown preset 'tiny'"):
        VMR2LEnv({"preset": "tiny"})


@pytest.mark.parametrize("env_id", IDS)
def test_settings_still_reach_the_environment_beside_render_mode(env_id):
    env = gym.make(env_id, render_mode="rgb_array", **SMALL[env_id]).unwrapped
    for key, value in SMALL[env_id].items():
        assert getattr(env.config, key) == value
    assert env.render_mode == "rgb_array"


# ------------------------------------------------------------------ vectorised, by id
@pytest.mark.filterwarnings("ignore:You tried to call render")
@pytest.mark.parametrize("env_id", IDS)
def test_sb3_make_vec_env_by_id_steps_two_copies(env_id):
    """The default ``DummyVecEnv``; ``make_vec_env`` asks for ``rgb_array``, so
    ``render()`` tiles both copies' images."""
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_util import make_vec_env

    for kwargs in (SMALL[env_id], {**SMALL[env_id], "render_mode": None}):
        venv = make_vec_env(env_id, n_envs=2, seed=0, env_kwargs=kwargs)
        obs = venv.reset()
        assert all(v.shape[0] == 2 for v in obs.values())
        for _ in range(3):
            obs, rewards, dones, infos = venv.step(
                np.array([venv.action_space.sample() for _ in range(2)]))
        assert rewards.shape == (2,) and len(infos) == 2
        image = venv.render()
        if kwargs.get("render_mode", "rgb_array") == "rgb_array":
            one = venv.envs[0].render()
            assert image.dtype == np.uint8 and image.shape[0] == 2 * one.shape[0]
        else:
            assert image is None
        venv.close()


@pytest.mark.parametrize("env_id", IDS)
def test_sb3_subprocvecenv_by_id_steps_two_copies_in_processes(env_id):
    """``vec_env_cls=SubprocVecEnv`` (``fork`` here to keep it fast; the slow test below
    uses the default start method, a fresh interpreter per worker)."""
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    venv = make_vec_env(env_id, n_envs=2, seed=0, env_kwargs=SMALL[env_id],
                        vec_env_cls=SubprocVecEnv, vec_env_kwargs={"start_method": "fork"})
    try:
        venv.reset()
        for _ in range(4):
            _, rewards, _, infos = venv.step(
                np.array([venv.action_space.sample() for _ in range(2)]))
        assert rewards.shape == (2,) and len(infos) == 2
        assert venv.get_attr("render_mode") == ["rgb_array", "rgb_array"]
        if env_id != "dcsim/VMR2L-v0":
            masks = venv.env_method("action_masks")
            assert len(masks) == 2 and masks[0].dtype == bool
    finally:
        venv.close()


@pytest.mark.slow
def test_sb3_subprocvecenv_by_id_with_the_default_start_method():
    """Each worker a fresh interpreter (forkserver): the id resolves there by itself (the
    start-up hook, or ``import dcsim`` through the pickled function)."""
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    for env_id in IDS:
        venv = make_vec_env(env_id, n_envs=2, seed=0, env_kwargs=SMALL[env_id],
                            vec_env_cls=SubprocVecEnv)
        try:
            venv.reset()
            venv.step(np.array([venv.action_space.sample() for _ in range(2)]))
            assert isinstance(venv.env_method("render")[0], np.ndarray)
        finally:
            venv.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("env_id", IDS)
def test_gymnasium_make_vec_by_id_steps_two_copies(env_id, mode):
    venv = gym.make_vec(env_id, num_envs=2, vectorization_mode=mode, **SMALL[env_id])
    try:
        obs, _ = venv.reset(seed=0)
        assert all(v.shape[0] == 2 for v in obs.values())
        for _ in range(4):
            obs, rewards, terminated, truncated, _ = venv.step(venv.action_space.sample())
        assert rewards.shape == (2,) and terminated.shape == (2,)
    finally:
        venv.close()


def test_gymnasium_make_vec_passes_render_mode_to_every_copy():
    venv = gym.make_vec("dcsim/VMR2L-TwoStep-v0", num_envs=2, render_mode="ansi",
                        **SMALL["dcsim/VMR2L-TwoStep-v0"])
    venv.reset(seed=0)
    frames = venv.render()
    assert len(frames) == 2 and all(f.startswith("dcsim/VMR2L-TwoStep-v0") for f in frames)
    venv.close()


# ------------------------------------------------------------------ training
@pytest.mark.parametrize("env_id", IDS)
def test_plain_ppo_trains_a_few_steps_by_id_through_forbidden_actions(env_id):
    """PPO without masks samples actions a mask forbids; every environment takes them (Nara:
    the request fails; VMR²L: a no-op) and training goes on."""
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    class CountForbidden(BaseCallback):
        forbidden = 0

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                self.forbidden += bool(info.get("invalid_action", info.get("invalid")))
            return True

    venv = make_vec_env(env_id, n_envs=2, seed=0, env_kwargs=SMALL[env_id])
    model = PPO("MultiInputPolicy", venv, n_steps=16, batch_size=16, n_epochs=1, seed=0,
                device="cpu", policy_kwargs={"net_arch": [16]})
    counter = CountForbidden()
    model.learn(total_timesteps=64, callback=counter)
    assert model.num_timesteps == 64 and counter.forbidden > 0
    action, _ = model.predict(venv.reset(), deterministic=True)
    assert len(action) == 2
    venv.close()


def test_a2c_trains_a_few_steps_on_nara_by_id():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import A2C
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env("dcsim/Nara-v0", n_envs=2, seed=0, env_kwargs={"requests": 8})
    model = A2C("MultiInputPolicy", venv, n_steps=8, seed=0, device="cpu",
                policy_kwargs={"net_arch": [16]})
    model.learn(total_timesteps=32)
    assert model.num_timesteps == 32
    venv.close()
