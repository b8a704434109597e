"""Provider adapters by ``kind``. Importing this package registers every adapter."""

from workers.client.adapters import openai_chat  # noqa: F401 - registers openai, simulated
from workers.client.adapters.base import Adapter, ProviderSetupError, build_adapter, register

__all__ = ["Adapter", "ProviderSetupError", "build_adapter", "register"]
