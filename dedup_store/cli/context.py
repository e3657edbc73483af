"""The frame of the command line: global settings, errors turned into exits, ``--version``.

Nothing here imports the store, the database driver or numpy, so that ``--help`` and
``--version`` answer at once; commands import them when they run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from dedup_store import config
from dedup_store.cli.render import escape
from dedup_store.errors import DatabaseError, DedupStoreError

if TYPE_CHECKING:
    from dedup_store.core.params import FingerprintParams
    from dedup_store.service import DedupStore

EXIT_INTERRUPTED = 130

#: ``--max-bytes`` of the commands that read documents (``ingest``, ``check``).
MaxBytes = Annotated[
    int | None,
    typer.Option(
        "--max-bytes",
        min=1,
        help="Largest document in UTF-8 bytes (default 16777216, 16 MiB).",
        show_default=False,
    ),
]


@dataclasses.dataclass
class Settings:
    """The global options, and the database URL once it has been resolved."""

    db_url: str | None
    schema: str
    debug: bool
    url: str | None = None
    url_from_environment: bool = False
    """Whether ``db_url`` came from ``DEDUP_STORE_URL`` rather than ``--db-url``."""
    replicas: list[str] = dataclasses.field(default_factory=list)
    """URLs of streaming replicas that serve reads (``--replica-url``)."""

    def resolve(self) -> str:
        """The database URL: ``--db-url``, ``DEDUP_STORE_URL``, else the embedded server."""
        if self.url is None:
            from dedup_store.db.server.location import resolve_url

            self.url = resolve_url(self.db_url, announce=announce)
        return self.url

    def store(
        self,
        *,
        create: bool = False,
        params: FingerprintParams | Mapping[str, Any] | None = None,
        **options: Any,
    ) -> DedupStore:
        """Open the store (``create``: make or upgrade the schema when missing); ``options``
        go to :class:`~dedup_store.service.DedupStore`."""
        from dedup_store.service import DedupStore

        if self.replicas:
            options.setdefault("replicas", self.replicas)
        return DedupStore(self.resolve(), params, self.schema, create=create, **options)


class ExitOnErrorGroup(TyperGroup):
    """The root command group: turns our exceptions into a message and an exit code."""

    def invoke(self, ctx: Any) -> Any:  # a click Context (typer may vendor its own click)
        try:
            return super().invoke(ctx)
        except DedupStoreError as e:
            _fail(ctx, e, str(e), e.exit_code)
        except KeyboardInterrupt as e:
            _fail(ctx, e, "interrupted", EXIT_INTERRUPTED)
        except BrokenPipeError:
            _output_closed()
        except OSError as e:  # standard output cannot take the output: a full disk, /dev/full
            _output_failed(ctx, e)
        except Exception as e:
            if not _is_driver_error(e):
                raise
            _fail(ctx, e, f"database error: {_driver_message(e)}", DatabaseError.exit_code)


def _output_closed() -> NoReturn:
    """The reader of standard output went away (``| head -1``): end quietly and successfully,
    as a Unix tool does, with what is left of the output going nowhere."""
    _stdout_to_nowhere()
    raise typer.Exit(0)


def _output_failed(ctx: Any, error: OSError) -> NoReturn:
    """Standard output refused the output: say so in one line (exit code 1), with what is left
    of the output going nowhere, so that the interpreter's last flush fails no more."""
    _stdout_to_nowhere()
    _fail(ctx, error, f"cannot write the output: {error.strerror or error}", 1)


def _stdout_to_nowhere() -> None:
    """Send what is left of standard output to the null device, so that the interpreter's last
    flush of it fails no more."""
    nowhere = os.open(os.devnull, os.O_WRONLY)
    os.dup2(nowhere, sys.stdout.fileno())


def announce(line: str) -> None:
    """Tell the user on standard error what takes a moment (the embedded server's first run)."""
    typer.echo(escape(line), err=True)


def _is_driver_error(error: Exception) -> bool:
    """An error of SQLAlchemy or psycopg (which can only be raised once they are imported)."""
    classes = [
        getattr(sys.modules.get(module), name, None)
        for module, name in (("sqlalchemy.exc", "SQLAlchemyError"), ("psycopg", "Error"))
    ]
    return any(isinstance(cls, type) and isinstance(error, cls) for cls in classes)


def _fail(ctx: Any, error: BaseException, message: str, code: int) -> NoReturn:
    settings = ctx.obj if isinstance(ctx.obj, Settings) else None
    if settings is not None and settings.debug:
        raise error
    urls = [settings.url, settings.db_url] if settings else []
    message = config.scrub(message, [p for u in urls if u for p in config.passwords_of(u)])
    typer.echo(f"error: {escape(message, keep=chr(10))}", err=True)
    raise typer.Exit(code)


def _driver_message(error: BaseException) -> str:
    orig = getattr(error, "orig", None) or error
    text = " ".join(part.strip() for part in str(orig).splitlines() if part.strip())
    return text or type(orig).__name__


def print_version(value: bool) -> None:
    """The ``--version`` callback: print the version, the source tree when the package runs
    from one, and the kernels in use, then exit."""
    if not value:
        return
    tree = source_tree()
    typer.echo(f"dedup-store {_version(tree)}")
    if tree is not None:
        typer.echo(f"source tree: {tree}")
    typer.echo(f"fingerprint kernels: {kernels_in_use(tree is not None)}")
    raise typer.Exit()


def source_tree() -> Path | None:
    """The checkout the package runs from (``python -m dedup_store`` in it, or an editable
    install), or ``None`` for an installed package: only a checkout has the kernels' C source
    beside them and a ``pyproject.toml`` above the package."""
    package = Path(__file__).resolve().parents[1]
    if (package / "core" / "_kernels.c").is_file() and (
        package.parent / "pyproject.toml"
    ).is_file():
        return package.parent
    return None


def _version(tree: Path | None) -> str:
    """The version of the code that runs: a checkout's own, else the installed package's."""
    import importlib.metadata

    if tree is not None:
        import tomllib

        project = tomllib.loads((tree / "pyproject.toml").read_text(encoding="utf-8"))
        return str(project["project"]["version"])
    return importlib.metadata.version("dedup-store")


def kernels_in_use(in_source_tree: bool) -> str:
    """Which kernels :mod:`dedup_store.core.kernels` runs, and why not the compiled ones.

    It finds them as that module does (which runs the reference ones when
    ``DEDUP_STORE_KERNELS`` is ``reference`` or the extension module does not load), loading
    the extension module from its file without importing the core (and numpy).
    """
    import importlib.machinery
    import importlib.util

    if os.environ.get(config.ENV_KERNELS) == "reference":
        return f"reference ({config.ENV_KERNELS}=reference)"
    core = str(Path(__file__).resolve().parents[1] / "core")
    spec = importlib.machinery.PathFinder.find_spec("dedup_store.core._kernels", [core])
    if spec is None or spec.loader is None:
        if in_source_tree:
            return (
                "reference (not compiled in this source tree; "
                "python setup.py build_ext --inplace compiles them)"
            )
        return "reference (installed without a C compiler)"
    try:
        importlib.util.module_from_spec(spec)
    except ImportError as e:
        return f"reference (the compiled kernels {spec.origin} do not load: {e})"
    return "compiled"


def settings_of(ctx: typer.Context) -> Settings:
    """The global settings of the command line."""
    settings = ctx.find_root().obj
    assert isinstance(settings, Settings)
    return settings


def meta_object(meta: str | None) -> dict[str, Any] | None:
    """The object of a ``--meta`` option (JSON), ``None`` without one."""
    from dedup_store.ingest.inputs import non_number_message, strict_json

    if meta is None:
        return None
    try:
        value = strict_json(meta)
    except json.JSONDecodeError as e:
        raise typer.BadParameter(f"not JSON: {e}", param_hint="--meta") from None
    except ValueError as e:  # as the readers of JSON Lines refuse it
        raise typer.BadParameter(non_number_message(e) or str(e), param_hint="--meta") from None
    if not isinstance(value, dict):
        raise typer.BadParameter("must be a JSON object", param_hint="--meta")
    return value


def field_names(names: str) -> tuple[str, ...]:
    """The names of a comma-separated option such as ``--meta-fields``."""
    return tuple(name.strip() for name in names.split(",") if name.strip())


def store_limits(max_bytes: int | None) -> dict[str, Any]:
    """The store's ``max_bytes`` option when ``--max-bytes`` is given (else its default)."""
    return {} if max_bytes is None else {"max_bytes": max_bytes}
