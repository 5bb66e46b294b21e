import os

from hypothesis import HealthCheck, settings

# CI runs every property a few hundred times; GS_HYPOTHESIS_EXAMPLES raises it locally.
settings.register_profile(
    "gatherscatter",
    max_examples=int(os.environ.get("GS_HYPOTHESIS_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("gatherscatter")
