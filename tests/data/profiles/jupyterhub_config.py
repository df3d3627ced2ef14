# ruff: noqa
# A jupyterhub_config.py for an EKS hub with Karpenter GPU node pools. It is read by
# the gpucost service's check-profiles without being run: importing it would need the
# hub's own modules and secrets.
import os

from kubernetes_asyncio.client.models import V1Toleration  # not installed in the service

c = get_config()

c.JupyterHub.spawner_class = "kubespawner.KubeSpawner"
c.KubeSpawner.node_selector = {"karpenter.sh/nodepool": "users"}
c.KubeSpawner.cpu_limit = 2


def pick_image(spawner):
    return os.environ.get("DEFAULT_IMAGE", "quay.io/jupyter/pytorch-notebook")


gpu_choices = {
    "a10g": {
        "display_name": "1 x A10G (24 GB)",
        "default": True,
        "kubespawner_override": {
            "extra_resource_limits": {"nvidia.com/gpu": "1"},
            "node_selector": {"karpenter.k8s.aws/instance-gpu-name": "a10g"},
        },
    },
    "4x-l4": {
        "display_name": "4 x L4 (g6.12xlarge, whole node)",
        "kubespawner_override": {
            "extra_resource_limits": {"nvidia.com/gpu": "4"},
            # as 2i2c's GPU guide writes it: directly under kubespawner_override
            "node.kubernetes.io/instance-type": "g6.12xlarge",
        },
    },
}

c.KubeSpawner.profile_list = [
    {
        "display_name": "CPU only",
        "slug": "cpu",
        "default": True,
        "kubespawner_override": {"image": pick_image, "mem_limit": "8G"},
    },
    {
        "display_name": "GPU",
        "slug": "gpu",
        "kubespawner_override": {"image": "quay.io/jupyter/pytorch-notebook:cuda12-latest"},
        "profile_options": {
            "gpu": {
                "display_name": "GPU",
                "choices": gpu_choices,
                "unlisted_choice": {
                    "enabled": True,
                    "display_name": "Karpenter GPU name",
                    "validation_regex": "^[a-z0-9]+$",
                    "kubespawner_override": {
                        "extra_resource_limits": {"nvidia.com/gpu": "1"},
                        "node_selector": {"karpenter.k8s.aws/instance-gpu-name": "{value}"},
                    },
                },
            }
        },
    },
    {
        "display_name": "Team GPU (by group)",
        "slug": "team-gpu",
        "kubespawner_override": {
            # only the hub knows: the callable runs at spawn time
            "extra_resource_limits": lambda spawner: {
                "nvidia.com/gpu": str(len(spawner.user.groups))
            },
            "node_selector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        },
    },
    {
        "display_name": "H100 × 8 (p5.48xlarge)",
        "slug": "p5",
        "kubespawner_override": {
            "extra_resource_limits": {"nvidia.com/gpu": "8"},
            "node_affinity_required": [
                {
                    "matchExpressions": [
                        {
                            "key": "node.kubernetes.io/instance-type",
                            "operator": "In",
                            "values": ["p5.48xlarge"],
                        }
                    ]
                }
            ],
        },
    },
]
