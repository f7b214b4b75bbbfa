"""Loading the configuration: defaults < the YAML file < the environment < command-line flags.

Every setting has an environment variable: ``SPARK_AUTOSCALER_`` and its dotted key with ``__``
between the levels, e.g. ``SPARK_AUTOSCALER_EXECUTORS__MAX=12`` for ``executors.max``
(pydantic-settings reads them; a mapping such as ``spark.conf`` takes JSON). A variable with the
prefix that names no setting is an error (a typo must not be ignored), with the closest name.
After the declarations' own checks come those that need the outside world: the files named
exist, the pipeline module can be imported, the policy is registered and takes its
parameters. Every problem is reported at once, each naming its key.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Iterator, Mapping, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)
from pydantic_settings import SettingsError as SourceError

from autoscaler.core.policy import PolicyError
from autoscaler.core.settings import Settings, format_validation_error, is_uri, local_path
from policies.registry import create_policy

ENV_PREFIX = "SPARK_AUTOSCALER_"
ENV_DELIMITER = "__"
# variables with the prefix that are not settings: the default name of the token variable
# (``http.token_env`` may name another)
NOT_SETTINGS = frozenset({"SPARK_AUTOSCALER_API_TOKEN"})
# variables read before settings had one each (until 0.1): named in the error, not ignored
RENAMED = {
    "SPARK_AUTOSCALER_POLICY": "policy.name",
    "SPARK_AUTOSCALER_MIN_EXECUTORS": "executors.min",
    "SPARK_AUTOSCALER_MAX_EXECUTORS": "executors.max",
    "SPARK_AUTOSCALER_PIPELINES": "pipelines.module",
    "SPARK_AUTOSCALER_CHECKPOINT_ROOT": "pipelines.checkpoint_root",
    "SPARK_AUTOSCALER_HTTP_HOST": "http.host",
    "SPARK_AUTOSCALER_HTTP_PORT": "http.port",
    "SPARK_AUTOSCALER_API_TOKEN_FILE": "http.token_file",
    "SPARK_AUTOSCALER_STATE_PATH": "state.path",
    "SPARK_MASTER": "spark.master",
}
# keys that hold paths: a relative path in the file is relative to the file
_FILE_RELATIVE = (("pipelines", "module"), ("http", "token_file"), ("state", "path"))
FILE_RELATIVE_KEYS = (*(".".join(key) for key in _FILE_RELATIVE), "pipelines.checkpoint_root", "http.token_files")


class SettingsError(ValueError):
    """Invalid configuration; ``problems`` holds one ``key: message`` line per problem."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("invalid configuration:\n" + "\n".join(f"  - {p}" for p in problems))


def env_var(key: str) -> str:
    """The environment variable of a dotted key: ``executors.max`` -> ``SPARK_AUTOSCALER_EXECUTORS__MAX``."""
    return ENV_PREFIX + key.replace(".", ENV_DELIMITER).upper()


def load_settings(
    path: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Read the YAML file, the environment and ``overrides`` (dotted keys; None values are
    left out), validate everything at once."""
    data = read_config_file(Path(path)) if path is not None else {}
    env = os.environ if environ is None else environ
    if problems := environment_problems(env, token_env=_token_variable(data, env, overrides or {})) + json_problems(env):
        raise SettingsError(problems)
    flags: dict[str, Any] = {}
    for dotted, value in (overrides or {}).items():
        if value is not None:
            _set_path(flags, dotted, value)
    token = _SOURCES.set((data, env))
    try:
        settings: Settings = _Loaded(**flags)
    except ValidationError as exc:
        raise SettingsError([format_validation_error(e) for e in exc.errors()]) from None
    except SourceError as exc:  # json_problems names the variable first; this is a last resort, never a traceback
        raise SettingsError([f"environment: {exc}"]) from None
    finally:
        _SOURCES.reset(token)
    if problems := outside_problems(settings):
        raise SettingsError(problems)
    return settings


def validate_settings(data: Mapping[str, Any], *, check_files: bool = True) -> Settings:
    """Settings from a mapping alone (no file, no environment), checked as :func:`load_settings` does.

    ``check_files=False`` skips what only the daemon's own machine can tell (the token files
    and a pipeline file exist, a pipeline module imports): the Kubernetes operator checks the
    configuration it writes for a daemon whose files are mounted into another pod.
    """
    try:
        settings = Settings.model_validate(dict(data))
    except ValidationError as exc:
        raise SettingsError([format_validation_error(e) for e in exc.errors()]) from None
    if problems := outside_problems(settings, check_files=check_files):
        raise SettingsError(problems)
    return settings


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses a key given twice in one mapping, naming it and both
    lines: PyYAML keeps the last one silently, so a second ``executors:`` block replaced the
    first. Keys merged in with ``<<: *anchor`` may be overridden, as YAML means them to be."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                seen = key in first_line
            except TypeError:  # an unhashable key: the constructor below refuses it
                continue
            if seen:
                problem = f"found duplicate key {key!r} (first on line {first_line[key]})"
                raise yaml.constructor.ConstructorError(None, None, problem, key_node.start_mark)
            first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


class ConfigFileError(ValueError):
    """A YAML configuration file that cannot be read; the message names the file and the problem."""


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """The mapping a YAML configuration file holds ({} when empty); :class:`ConfigFileError`
    naming the file when it is missing, not UTF-8, not YAML or not a mapping. The daemon's
    configuration and the operator's are read by this one function."""
    if problem := file_problem(path):
        raise ConfigFileError(f"config file {str(path)!r} {problem}")
    try:
        loaded = yaml.load(path.read_text(encoding="utf-8"), Loader=UniqueKeyLoader)  # a SafeLoader: no Python objects
    except yaml.YAMLError as exc:
        raise ConfigFileError(f"config file {str(path)!r} is not valid YAML: {exc}") from None
    except RecursionError:
        raise ConfigFileError(f"config file {str(path)!r} is nested too deeply to be a configuration") from None
    except UnicodeDecodeError as exc:
        raise ConfigFileError(f"config file {str(path)!r} is not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise ConfigFileError(f"config file {str(path)!r} cannot be read: {exc.strerror or exc}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigFileError(f"config file {str(path)!r} must hold a mapping of settings")
    if odd := [key for key in loaded if not isinstance(key, str)]:  # `1:`, `true:`, a date: no setting's name
        raise ConfigFileError(f"config file {str(path)!r}: key {odd[0]!r} is not a setting's name (a key must be text)")
    return loaded


def read_config_file(path: Path) -> dict[str, Any]:
    """The daemon's YAML file, its relative paths made relative to the file."""
    try:
        loaded = read_yaml_mapping(path)
    except ConfigFileError as exc:
        raise SettingsError([str(exc)]) from None
    # keys are matched as written, as the nested ones are: the settings' case-blind reading (for
    # the environment's upper case) took `Executors:` beside `executors:` and dropped one of them
    known = Settings.model_fields
    if miscased := [f"{key}: unknown key (did you mean {key.lower()}?)" for key in loaded if key not in known and key.lower() in known]:
        raise SettingsError(miscased)
    # a dotted key is how --setting and the overrides name a setting; a file nests it ("executors.max:
    # unknown key" read as if there were no such setting)
    if dotted := [key for key in loaded if "." in key and key.split(".")[0] in known]:
        first, _, rest = dotted[0].partition(".")
        raise SettingsError([f"{dotted[0]}: unknown key; a file nests its settings: write {first}: {{{rest}: ...}}"])
    for section, key in _FILE_RELATIVE:
        node = loaded.get(section)
        if isinstance(node, dict) and isinstance(node.get(key), str):
            value = node[key]
            is_file = section != "pipelines" or value.endswith(".py") or "/" in value  # else a dotted module name
            if is_file:
                node[key] = _beside(path, value)
    pipelines = loaded.get("pipelines")
    if isinstance(pipelines, dict) and isinstance(root := pipelines.get("checkpoint_root"), str) and not is_uri(root):
        # as the module beside it: `checkpoint_root: ck` was under the working directory of
        # whoever started the daemon, so another cwd restarted every query from nothing
        local = local_path(root)
        if root.strip() and _as_written(root) and not local.is_absolute():
            anchored = (path.parent / local).resolve()
            if problem := moved_checkpoints("pipelines.checkpoint_root", "the configuration file", root, anchored, (Path.cwd() / local).resolve()):
                raise SettingsError([problem])
            pipelines["checkpoint_root"] = str(anchored)
    http = loaded.get("http")
    if isinstance(http, dict) and isinstance(http.get("token_files"), list):
        http["token_files"] = [_beside(path, v) if isinstance(v, str) else v for v in http["token_files"]]
    return loaded


def moved_checkpoints(setting: str, anchor: str, written: str, anchored: Path, under_cwd: Path) -> str | None:
    """Why a relative checkpoint location cannot be made relative to the file that gives it
    now: until 2026-12-02 it was relative to the working directory, and a daemon started
    elsewhere has its checkpoints there. Taking the file's directory would restart every query
    without its offsets and state; refused, naming both places, until one of them is written.
    ``setting`` names what gives it, ``anchor`` the file it is now relative to."""
    if anchored == under_cwd or anchored.exists() or not under_cwd.is_dir():
        return None
    return (f"{setting}: {written!r} is relative to {anchor} ({anchored}), but the checkpoints are under the working "
            f"directory ({under_cwd}), where a relative one was read before: move them, or write {str(under_cwd)!r}")


def _token_variable(data: Mapping[str, Any], environ: Mapping[str, str], flags: Mapping[str, Any]) -> str | None:
    """The ``http.token_env`` the sources give, the highest first (before they are validated)."""
    if isinstance(flags.get("http.token_env"), str):
        return str(flags["http.token_env"])
    wanted = env_var("http.token_env")
    if given := [value for name, value in environ.items() if name.upper() == wanted and value]:
        return given[0]
    http = data.get("http")
    return http.get("token_env") if isinstance(http, dict) and isinstance(http.get("token_env"), str) else None


def _beside(config: Path, value: str) -> str:
    """``value`` relative to the configuration file's directory, if it is a relative path as written."""
    return str((config.parent / value).resolve()) if _as_written(value) and not Path(value).is_absolute() else value


def _as_written(value: str) -> bool:
    """Whether a path has no space around it; one that has is refused by its setting as written,
    not made relative to the file first (`` /data/s.json`` became ``<dir>/ /data/s.json``)."""
    return value == value.strip()


def environment_problems(environ: Mapping[str, str], *, token_env: str | None = None) -> list[str]:
    """Variables that look like settings but are none: renamed ones, typos (with the closest name).
    The variable ``http.token_env`` names holds a token, not a setting, whatever its prefix; a
    setting's own variable cannot be it."""
    known = set(setting_variables())
    prefixes = tuple(env_var(key) + ENV_DELIMITER for key in mapping_keys())
    not_settings = NOT_SETTINGS | ({token_env.upper()} if token_env else set())
    problems = []
    if token_env and (token_env.upper() in known or token_env.upper().startswith(prefixes)):
        problems.append(f"http.token_env: {token_env} is the variable of a setting, not one to hold a token; name another")
    for name in sorted(environ):
        upper = name.upper()
        if upper in RENAMED:
            problems.append(f"environment: {name} is no longer read; set {env_var(RENAMED[upper])} ({RENAMED[upper]})")
        elif upper.startswith(ENV_PREFIX) and upper not in known and upper not in not_settings and not upper.startswith(prefixes):
            # the prefix is common to all: compare what follows it
            close = difflib.get_close_matches(upper.removeprefix(ENV_PREFIX), [k.removeprefix(ENV_PREFIX) for k in sorted(known)], n=1, cutoff=0.75)
            hint = f" (did you mean {ENV_PREFIX}{close[0]}?)" if close else ""
            problems.append(f"environment: {name} is not a setting{hint}")
    return problems


# what a variable of a setting that is not a single value takes (pydantic-settings decodes it as JSON)
_JSON_KINDS = {
    "section": "a JSON object, or one variable per key",
    "list": 'a JSON list, e.g. ["/a", "/b"]',
    "mapping": "a JSON object, or one variable per entry",
}


def json_problems(environ: Mapping[str, str]) -> list[str]:
    """Variables of sections, lists and mappings whose value is not JSON, each named: pydantic-settings
    raises an error of its own that names only the section, and ends the first problem it meets.
    The value is not repeated (``spark.conf`` may hold a secret)."""
    kinds = {env_var(key): (key, kind) for key, annotation in _keys(Settings, "") if (kind := _json_kind(annotation))}
    problems = []
    for name in sorted(environ):
        key, kind = kinds.get(name.upper(), (None, None))
        if key is None or kind is None or environ[name] == "":  # empty: not set (env_ignore_empty)
            continue
        try:
            json.loads(environ[name])
        except ValueError as exc:
            problems.append(f"environment: {name} ({key}) is not JSON ({exc}); it takes {_JSON_KINDS[kind]}")
        except RecursionError:
            problems.append(f"environment: {name} ({key}) is nested too deeply; it takes {_JSON_KINDS[kind]}")
    return problems


def _json_kind(annotation: Any) -> str | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    origin = get_origin(annotation) or annotation
    return "list" if origin is list else "mapping" if origin is dict else None


def setting_variables() -> Iterator[str]:
    """The environment variable of every setting, including the nested sections themselves."""
    for key, _ in _keys(Settings, ""):
        yield env_var(key)


def mapping_keys() -> list[str]:
    """Dotted keys of settings that hold mappings (``spark.conf``, ``policy.params``): their
    entries can be set one by one (``SPARK_AUTOSCALER_POLICY__PARAMS__HORIZON=1h``)."""
    return [key for key, annotation in _keys(Settings, "") if getattr(annotation, "__origin__", annotation) is dict]


def _keys(model: type[BaseModel], prefix: str) -> Iterator[tuple[str, Any]]:
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        yield key, field.annotation
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            yield from _keys(field.annotation, f"{key}.")


def outside_problems(settings: Settings, *, check_files: bool = True) -> list[str]:
    """What the declarations cannot check alone: files, the pipeline module, the policy."""
    problems = []
    if check_files:
        problems.extend(_file_problems(settings))
    try:
        create_policy(settings.policy.name, settings.policy.params)
    except PolicyError as exc:
        problems.append(f"policy: {exc}")
    return problems


def _file_problems(settings: Settings) -> list[str]:
    problems = []
    module = settings.pipelines.module
    if module is not None:
        if module.endswith(".py") or "/" in module:
            if problem := file_problem(Path(module)):
                problems.append(f"pipelines.module: pipeline file {module!r} {problem}")
        elif problem := module_problem(module):
            problems.append(f"pipelines.module: pipeline module {module!r} {problem}")
    token_file = settings.http.token_file
    if token_file is not None and (problem := file_problem(token_file)):
        problems.append(f"http.token_file: {str(token_file)!r} {problem}")
    for i, extra in enumerate(settings.http.token_files):
        if problem := file_problem(extra):
            problems.append(f"http.token_files.{i}: {str(extra)!r} {problem}")
    return problems


def module_problem(module: str) -> str | None:
    """Why the dotted name ``module`` cannot be imported, or None. ``find_spec`` imports the parent
    packages, and raises for a relative name (``.rel``) or a parent that is missing or no package."""
    if not all(part.isidentifier() for part in module.split(".")):
        return "is not a dotted module name (such as mypkg.pipelines) nor a .py file"
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        return f"cannot be imported ({exc})"
    return None if found is not None else "cannot be imported"


def file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be read as a file (``does not exist``, ``is not a file``), or None."""
    if not path.exists():
        return "does not exist"
    if not path.is_file():
        return "is not a file"
    return None


# --- pydantic-settings: the file and the environment below the flags ------------------------------

_SOURCES: ContextVar[tuple[dict[str, Any], Mapping[str, str]]] = ContextVar("settings_sources")


class _Environment(EnvSettingsSource):
    """The environment given to :func:`load_settings` (``os.environ`` unless a test passes one)."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        # as EnvSettingsSource reads os.environ: names folded to lower case, empty values left
        # out; but a Spark property keeps its case (..._SPARK__CONF__spark.executor.extraJavaOptions
        # was spark.executor.extrajavaoptions, a property Spark does not have). A policy's
        # parameters are lower-case names: ..._POLICY__PARAMS__HORIZON is horizon.
        return {_fold(name): value for name, value in self._environ.items() if not (self.env_ignore_empty and value == "")}


_SPARK_PROPERTY_PREFIX = env_var("spark.conf") + ENV_DELIMITER


def _fold(name: str) -> str:
    """``name`` in lower case, but for the Spark property an entry of ``spark.conf`` names."""
    if name.upper().startswith(_SPARK_PROPERTY_PREFIX):
        return _SPARK_PROPERTY_PREFIX.lower() + name[len(_SPARK_PROPERTY_PREFIX):]
    return name.lower()


class _Loaded(Settings, BaseSettings):  # the declarations, loaded by pydantic-settings
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter=ENV_DELIMITER, env_ignore_empty=True, case_sensitive=False
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        data, environ = _SOURCES.get()
        # the first source wins: flags, then the environment, then the file
        return init_settings, _Environment(settings_cls, environ), InitSettingsSource(settings_cls, init_kwargs=data)


def _set_path(tree: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    node = tree
    for key in keys[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[keys[-1]] = value
