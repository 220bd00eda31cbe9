from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HealthRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HealthResponse(_message.Message):
    __slots__ = ("pid", "loaded", "device", "dtype", "versions", "cuda_available")
    class VersionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PID_FIELD_NUMBER: _ClassVar[int]
    LOADED_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    CUDA_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    pid: int
    loaded: bool
    device: str
    dtype: str
    versions: _containers.ScalarMap[str, str]
    cuda_available: bool
    def __init__(self, pid: _Optional[int] = ..., loaded: _Optional[bool] = ..., device: _Optional[str] = ..., dtype: _Optional[str] = ..., versions: _Optional[_Mapping[str, str]] = ..., cuda_available: _Optional[bool] = ...) -> None: ...

class GSPO(_message.Message):
    __slots__ = ("importance_sampling_level", "beta", "epsilon_low", "epsilon_high", "advantage_epsilon", "temperature", "num_iterations", "gradient_accumulation_steps")
    IMPORTANCE_SAMPLING_LEVEL_FIELD_NUMBER: _ClassVar[int]
    BETA_FIELD_NUMBER: _ClassVar[int]
    EPSILON_LOW_FIELD_NUMBER: _ClassVar[int]
    EPSILON_HIGH_FIELD_NUMBER: _ClassVar[int]
    ADVANTAGE_EPSILON_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    NUM_ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    GRADIENT_ACCUMULATION_STEPS_FIELD_NUMBER: _ClassVar[int]
    importance_sampling_level: str
    beta: float
    epsilon_low: float
    epsilon_high: float
    advantage_epsilon: float
    temperature: float
    num_iterations: int
    gradient_accumulation_steps: int
    def __init__(self, importance_sampling_level: _Optional[str] = ..., beta: _Optional[float] = ..., epsilon_low: _Optional[float] = ..., epsilon_high: _Optional[float] = ..., advantage_epsilon: _Optional[float] = ..., temperature: _Optional[float] = ..., num_iterations: _Optional[int] = ..., gradient_accumulation_steps: _Optional[int] = ...) -> None: ...

class AdamW(_message.Message):
    __slots__ = ("learning_rate", "beta1", "beta2", "eps", "weight_decay", "warmup_updates", "total_updates", "min_learning_rate", "sgd")
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    BETA1_FIELD_NUMBER: _ClassVar[int]
    BETA2_FIELD_NUMBER: _ClassVar[int]
    EPS_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_DECAY_FIELD_NUMBER: _ClassVar[int]
    WARMUP_UPDATES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_UPDATES_FIELD_NUMBER: _ClassVar[int]
    MIN_LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    SGD_FIELD_NUMBER: _ClassVar[int]
    learning_rate: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float
    warmup_updates: int
    total_updates: int
    min_learning_rate: float
    sgd: bool
    def __init__(self, learning_rate: _Optional[float] = ..., beta1: _Optional[float] = ..., beta2: _Optional[float] = ..., eps: _Optional[float] = ..., weight_decay: _Optional[float] = ..., warmup_updates: _Optional[int] = ..., total_updates: _Optional[int] = ..., min_learning_rate: _Optional[float] = ..., sgd: _Optional[bool] = ...) -> None: ...

class LoadRequest(_message.Message):
    __slots__ = ("base_dir", "lora_rank", "lora_alpha", "lora_target_modules", "dtype", "device", "use_4bit", "seed", "gspo", "adamw", "adapter", "threads")
    BASE_DIR_FIELD_NUMBER: _ClassVar[int]
    LORA_RANK_FIELD_NUMBER: _ClassVar[int]
    LORA_ALPHA_FIELD_NUMBER: _ClassVar[int]
    LORA_TARGET_MODULES_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    USE_4BIT_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    GSPO_FIELD_NUMBER: _ClassVar[int]
    ADAMW_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_FIELD_NUMBER: _ClassVar[int]
    THREADS_FIELD_NUMBER: _ClassVar[int]
    base_dir: str
    lora_rank: int
    lora_alpha: float
    lora_target_modules: _containers.RepeatedScalarFieldContainer[str]
    dtype: str
    device: str
    use_4bit: bool
    seed: int
    gspo: GSPO
    adamw: AdamW
    adapter: str
    threads: int
    def __init__(self, base_dir: _Optional[str] = ..., lora_rank: _Optional[int] = ..., lora_alpha: _Optional[float] = ..., lora_target_modules: _Optional[_Iterable[str]] = ..., dtype: _Optional[str] = ..., device: _Optional[str] = ..., use_4bit: _Optional[bool] = ..., seed: _Optional[int] = ..., gspo: _Optional[_Union[GSPO, _Mapping]] = ..., adamw: _Optional[_Union[AdamW, _Mapping]] = ..., adapter: _Optional[str] = ..., threads: _Optional[int] = ...) -> None: ...

class LoadResponse(_message.Message):
    __slots__ = ("base_parameters", "adapter_parameters", "adapter", "device", "dtype")
    BASE_PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    base_parameters: int
    adapter_parameters: int
    adapter: str
    device: str
    dtype: str
    def __init__(self, base_parameters: _Optional[int] = ..., adapter_parameters: _Optional[int] = ..., adapter: _Optional[str] = ..., device: _Optional[str] = ..., dtype: _Optional[str] = ...) -> None: ...

class Prompt(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, ids: _Optional[_Iterable[int]] = ...) -> None: ...

class GenerateRequest(_message.Message):
    __slots__ = ("prompts", "group_size", "max_new_tokens", "temperature", "top_k", "seed", "out")
    PROMPTS_FIELD_NUMBER: _ClassVar[int]
    GROUP_SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_NEW_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    OUT_FIELD_NUMBER: _ClassVar[int]
    prompts: _containers.RepeatedCompositeFieldContainer[Prompt]
    group_size: int
    max_new_tokens: int
    temperature: float
    top_k: int
    seed: int
    out: str
    def __init__(self, prompts: _Optional[_Iterable[_Union[Prompt, _Mapping]]] = ..., group_size: _Optional[int] = ..., max_new_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_k: _Optional[int] = ..., seed: _Optional[int] = ..., out: _Optional[str] = ...) -> None: ...

class GenerateResponse(_message.Message):
    __slots__ = ("traces", "tokens", "seconds")
    TRACES_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    traces: str
    tokens: int
    seconds: float
    def __init__(self, traces: _Optional[str] = ..., tokens: _Optional[int] = ..., seconds: _Optional[float] = ...) -> None: ...

class StepRequest(_message.Message):
    __slots__ = ("traces", "group_size", "out", "gradient", "dry_run")
    TRACES_FIELD_NUMBER: _ClassVar[int]
    GROUP_SIZE_FIELD_NUMBER: _ClassVar[int]
    OUT_FIELD_NUMBER: _ClassVar[int]
    GRADIENT_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    traces: str
    group_size: int
    out: str
    gradient: str
    dry_run: bool
    def __init__(self, traces: _Optional[str] = ..., group_size: _Optional[int] = ..., out: _Optional[str] = ..., gradient: _Optional[str] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class StepStats(_message.Message):
    __slots__ = ("loss", "policy_loss", "kl", "clip_frac", "ratio_mean", "ratio_std", "ratio_min", "ratio_max", "token_ratio_std", "zero_var_groups", "learning_rate", "train_tokens", "updates")
    LOSS_FIELD_NUMBER: _ClassVar[int]
    POLICY_LOSS_FIELD_NUMBER: _ClassVar[int]
    KL_FIELD_NUMBER: _ClassVar[int]
    CLIP_FRAC_FIELD_NUMBER: _ClassVar[int]
    RATIO_MEAN_FIELD_NUMBER: _ClassVar[int]
    RATIO_STD_FIELD_NUMBER: _ClassVar[int]
    RATIO_MIN_FIELD_NUMBER: _ClassVar[int]
    RATIO_MAX_FIELD_NUMBER: _ClassVar[int]
    TOKEN_RATIO_STD_FIELD_NUMBER: _ClassVar[int]
    ZERO_VAR_GROUPS_FIELD_NUMBER: _ClassVar[int]
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    TRAIN_TOKENS_FIELD_NUMBER: _ClassVar[int]
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    loss: float
    policy_loss: float
    kl: float
    clip_frac: float
    ratio_mean: float
    ratio_std: float
    ratio_min: float
    ratio_max: float
    token_ratio_std: float
    zero_var_groups: int
    learning_rate: float
    train_tokens: int
    updates: int
    def __init__(self, loss: _Optional[float] = ..., policy_loss: _Optional[float] = ..., kl: _Optional[float] = ..., clip_frac: _Optional[float] = ..., ratio_mean: _Optional[float] = ..., ratio_std: _Optional[float] = ..., ratio_min: _Optional[float] = ..., ratio_max: _Optional[float] = ..., token_ratio_std: _Optional[float] = ..., zero_var_groups: _Optional[int] = ..., learning_rate: _Optional[float] = ..., train_tokens: _Optional[int] = ..., updates: _Optional[int] = ...) -> None: ...

class StepResponse(_message.Message):
    __slots__ = ("stats", "adapter", "gradient", "seconds")
    STATS_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_FIELD_NUMBER: _ClassVar[int]
    GRADIENT_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    stats: StepStats
    adapter: str
    gradient: str
    seconds: float
    def __init__(self, stats: _Optional[_Union[StepStats, _Mapping]] = ..., adapter: _Optional[str] = ..., gradient: _Optional[str] = ..., seconds: _Optional[float] = ...) -> None: ...

class SetAdapterRequest(_message.Message):
    __slots__ = ("adapter", "reset_optimizer")
    ADAPTER_FIELD_NUMBER: _ClassVar[int]
    RESET_OPTIMIZER_FIELD_NUMBER: _ClassVar[int]
    adapter: str
    reset_optimizer: bool
    def __init__(self, adapter: _Optional[str] = ..., reset_optimizer: _Optional[bool] = ...) -> None: ...

class SetAdapterResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EvaluateRequest(_message.Message):
    __slots__ = ("prompts", "max_new_tokens")
    PROMPTS_FIELD_NUMBER: _ClassVar[int]
    MAX_NEW_TOKENS_FIELD_NUMBER: _ClassVar[int]
    prompts: _containers.RepeatedCompositeFieldContainer[Prompt]
    max_new_tokens: int
    def __init__(self, prompts: _Optional[_Iterable[_Union[Prompt, _Mapping]]] = ..., max_new_tokens: _Optional[int] = ...) -> None: ...

class Completion(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, ids: _Optional[_Iterable[int]] = ...) -> None: ...

class EvaluateResponse(_message.Message):
    __slots__ = ("completions",)
    COMPLETIONS_FIELD_NUMBER: _ClassVar[int]
    completions: _containers.RepeatedCompositeFieldContainer[Completion]
    def __init__(self, completions: _Optional[_Iterable[_Union[Completion, _Mapping]]] = ...) -> None: ...
