"""What a plan says: the frozen models of `cudatx remove|install|sync --dry-run --json`.

Their JSON is a documented contract (README.md, "The plan as JSON").
"""

from __future__ import annotations

from cudatx.analysis.cuda import Mixed
from cudatx.analysis.frameworks import ContextChange
from cudatx.models import Distribution, Evidence, Frozen, SandboxUsed, Status, SystemPackage

SCHEMA_VERSION = 1
MET = (Status.RESOLVED, Status.SYSTEM)  # the statuses of a need that is met


class NameVersion(Frozen):
    name: str
    version: str


class Arriving(Frozen):
    """A distribution a plan installs or reinstalls, and where uv takes its bytes from
    (cudatx.planning.sources)."""

    name: str
    version: str
    # the wheel (or what uv builds from, under --allow-build) uv's resolution chose, with the
    # options the apply gives it: a local file's absolute path, else its URL; None where
    # cudatx cannot know it (`source_note` says why)
    source: str | None = None
    source_note: str | None = None  # why `source` is None, or what the staged bytes contradict


class Broken(Frozen):
    soname: str
    needed_by: str
    needed_by_dist: str | None
    evidence: Evidence
    provider: str | None  # the file that met the need before
    provider_owners: tuple[str, ...]
    reason: str
    roots: tuple[str, ...]
    # versions ("`V'") and symbols ("S", "S@V") the provider found lacks (glibc's checks)
    missing: tuple[str, ...] = ()
    # the system package (dpkg, rpm) of the file found after the change, where it lacks
    # them: what would have to change, and cudatx never changes it
    system_package: SystemPackage | None = None
    # the traced runs (`cudatx trace`) that loaded it, by id (`Plan.traces` names them)
    traces: tuple[str, ...] = ()


class BrokenRoot(Frozen):
    root: str
    dist: str | None
    first_missing: str
    detail: str | None = None  # glibc's message where a version or a symbol fails
    missing: tuple[str, ...] = ()  # those versions ("`V'") and symbols ("S", "S@V")
    # A framework's run-time root: who loads it ("onnxruntime's CUDA provider") and in
    # which context (cudatx.analysis.frameworks); None for an import.
    framework: str | None = None
    context: str | None = None
    # A module of a package shipped in another's wheel and imported by it (nvfuser by
    # torch): the package whose import fails (cudatx.discover.imports.Companion).
    importer: str | None = None


class Rebound(Frozen):
    soname: str
    needed_by: str
    needed_by_dist: str | None
    evidence: Evidence
    provider_before: str
    provider_after: str
    provider_before_owners: tuple[str, ...]  # whose bytes were there (a co-owned path: the
    provider_after_owners: tuple[str, ...]  # owners whose RECORD hash matches them)
    cuda_major_before: int | None
    cuda_major_after: int | None


class TraceRun(Frozen):
    """A traced run the plan read (`cudatx trace`): its loads count while it is fresh."""

    id: str
    command: str  # as a shell reads it
    created: str  # ISO 8601, UTC
    label: str  # "the traced run `CMD` (2026-12-02 14:00 UTC)"
    exit_code: int
    stale: str | None  # why its loads are not counted; None: counted


class Loss(Frozen):
    """A distribution that stays installed while the change takes files its RECORD lists:
    deleted, or left holding another distribution's bytes (the seed's mechanism: uv deletes
    every path a RECORD lists, and installs over whatever is there)."""

    name: str
    version: str
    missing: tuple[str, ...]  # RECORD paths the change deletes
    other_bytes: tuple[str, ...]  # RECORD paths the change leaves holding other bytes
    imports: tuple[str, ...] = ()  # modules whose import breaks with them ("cv2")
    # Whether a path of them is code (cudatx.analysis.ownership.is_code_file: a module, a
    # library, an executable); False: headers, docs or data only, counted with --strict.
    code: bool = True


class Cured(Frozen):
    """An error doctor reports now that the environment after the change no longer has."""

    kind: str
    what: str


class RequirementBroken(Frozen):
    dist: str
    requirement: str


class Preexisting(Frozen):
    kind: str  # "edge", "root" or "requirement"
    what: str


class Repair(Frozen):
    reinstall: tuple[NameVersion, ...]
    # None: not checked, since the reinstall restores other bytes than those on disk now;
    # `--repair` stages its wheels and checks it with their bytes
    safe: bool | None


class TrialCheck(Frozen):
    """One check of a trial (cudatx.trial): an import, a framework's load step or a user's
    command, with the model's verdict and the trial's side by side."""

    check: str  # "import torch", "--trial-cmd 'pytest -x'", a framework step's label
    dists: tuple[str, ...]  # the distributions that install the module (an import's)
    # "breaks" or "loads"; "unchanged" where the trial saw it fail before the change and the
    # model has no break of its own for it; "not modelled" for a user's command
    model: str
    # "breaks" (worked before, fails after), "loads", "failed before" (already failing),
    # "fixed" (failed before, works after), "removed" (leaves with its distribution)
    trial: str
    error: str | None = None  # the interpreter's last line where it fails after
    disagreement: str | None = None  # model and trial disagree, in words


class Trial(Frozen):
    """A trial run (`--trial`): the planned change made in a shadow of the environment and
    judged by the real interpreter before and after."""

    method: str  # the shadow: "overlay", "reflink" or "copy"
    shadow: str  # the shadow and what it cost, in words
    shadow_seconds: float
    bytes_copied: int
    uv_seconds: float
    judge_seconds: float  # before and after together
    checks: int  # how many checks ran after the change
    breaks: int  # what worked before and fails after: real breaks
    roots: tuple[TrialCheck, ...]  # every check, the model's verdict beside the trial's
    disagreements: tuple[str, ...]
    error: str | None = None  # the change could not be made in the shadow (uv's error)
    # the confinement the trial's uv and code ran under (cudatx.sandbox): None where the
    # report predates it
    sandbox: SandboxUsed | None = None
    # whether the frameworks' GPU start steps ran: "1 GPU", or "no GPU (why)"; None where
    # the report predates them
    gpu: str | None = None
    # the judgement before the change was kept from an earlier trial (cudatx.trial.kept):
    # the number of files and folders it read, none changed since; 0: judged in this trial
    before_kept: int = 0


class Plan(Frozen):
    schema_version: int = SCHEMA_VERSION
    prefix: str
    safe: bool
    remove: tuple[NameVersion, ...]
    reinstall: tuple[Arriving, ...]
    install: tuple[Arriving, ...] = ()  # arriving (new, or the new version of an upgrade)
    broken: tuple[Broken, ...]
    broken_roots: tuple[BrokenRoot, ...]
    rebound: tuple[Rebound, ...]
    requirements_broken: tuple[RequirementBroken, ...]
    requirements_checked: bool
    left_hollow: tuple[NameVersion, ...]  # stay, but lose files their RECORD lists (shared paths)
    # stay, but arriving files replace bytes their RECORD lists with other bytes (shared
    # paths): the path's effective owner changes
    overwritten: tuple[NameVersion, ...] = ()
    # what each distribution of left_hollow and overwritten loses, path by path: a loss makes
    # the plan unsafe, as a lost library does
    losses: tuple[Loss, ...] = ()
    mixed: tuple[Mixed, ...] = ()  # torch would resolve a library built for another CUDA major
    # would break, on weak evidence only (a soname-shaped string in .rodata): listed as "may
    # fail at run time", counted in `safe` only with `strict`
    at_risk: tuple[Broken, ...] = ()
    # contexts a framework's run-time root loaded in before and not after (one that breaks
    # makes the plan unsafe; one the change removes, torch's, is said, not counted)
    contexts: tuple[ContextChange, ...] = ()
    strict: bool = False
    preexisting: tuple[Preexisting, ...]  # what doctor reports now and the change leaves
    cures: tuple[Cured, ...] = ()  # what doctor reports now and the change cures
    repair: Repair | None  # a repair that would help, when the plan does not include it
    # what `install --replacing` would uninstall in the same transaction, where the arriving
    # files would leave them holding other bytes and that plan is safe: a suggestion
    replacing: tuple[NameVersion, ...] = ()
    notes: tuple[str, ...]
    traces: tuple[TraceRun, ...] = ()  # the traced runs read, fresh (counted) and stale
    # the trial (`--trial`): None without it; a real break it sees makes the plan unsafe
    trial: Trial | None = None


def name_version(dist: Distribution | Arriving) -> NameVersion:
    return NameVersion(name=dist.name, version=dist.version)


def arriving_of(dist: Distribution) -> Arriving:
    """Where its bytes come from is told later (cudatx.planning.sources), once uv is asked."""
    return Arriving(name=dist.name, version=dist.version)
