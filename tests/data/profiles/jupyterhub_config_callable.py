# ruff: noqa
# A jupyterhub_config.py whose profile list is a callable of the spawner: only the hub
# can know its profiles.
c = get_config()


async def profiles_for(spawner):
    groups = [g.name for g in spawner.user.groups]
    return [{"display_name": "GPU", "slug": "gpu"}] if "gpu" in groups else []


c.KubeSpawner.profile_list = profiles_for
