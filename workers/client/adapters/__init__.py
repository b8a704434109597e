"""Provider adapters by ``kind``. Importing this package registers every adapter."""

# Imported for their @register side effect: one module per wire dialect.
from workers.client.adapters import (  # noqa: F401
    anthropic,
    azure_openai,
    bedrock,
    gemini,
    llamacpp,
    openai_chat,
    openai_completions,
    openai_responses,
    replicate,
    tgi,
)
from workers.client.adapters.base import (
    Adapter,
    AdapterContext,
    ProviderSetupError,
    build_adapter,
    register,
)

__all__ = ["Adapter", "AdapterContext", "ProviderSetupError", "build_adapter", "register"]
