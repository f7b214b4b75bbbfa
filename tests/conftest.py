"""Every test session sees the policies loaded, as the daemon's composition root loads them."""

from autoscaler.app.compose import load_policies

load_policies()
