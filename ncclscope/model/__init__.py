"""The pydantic models, one module per thing they describe, and their pandas frames.

The models are the contract of `ncclscope parse --format json` (and of `ncclscope schema`). Every fact
keeps where it came from (`Evidence`: source path, line number, text) so that a person can check it.
Each model lives in the module of what it describes; all are importable from here.
"""

from ncclscope.model.analysis import (  # noqa: F401
    SEVERITY_ORDER,
    Analysis,
    BandwidthJudgement,
    Finding,
    Platform,
)
from ncclscope.model.base import (  # noqa: F401
    Evidence,
    Record,
    Source,
    SourceKind,
    UnrecognizedLine,
)
from ncclscope.model.benchmarks import (  # noqa: F401
    BenchmarkRow,
    BenchmarkRun,
    GraphSearch,
    Measurement,
    RunCapture,
    RunRecord,
    RunStatus,
    RunStep,
    SystemTopology,
    TestDevice,
    TestFailure,
    TopologyMatrix,
    TopoPath,
    TuningChoice,
)
from ncclscope.model.case import (  # noqa: F401
    Case,
    Severity,
)
from ncclscope.model.hangs import (  # noqa: F401
    CollCalls,
    FlightRecorderDump,
    FlightRecorderEntry,
    FlightRecorderGroup,
    FlightRecorderStatus,
    FrTraceReport,
    GroupProgress,
    RankProgress,
    RasCommunicator,
    RasGroup,
    RasJob,
    RasReport,
)
from ncclscope.model.host_reports import (  # noqa: F401
    IbDevice,
    IbPort,
    KernelEvent,
    NcclGraphDump,
    NcclTopologyDump,
    NvlinkGpu,
    NvlinkLink,
    P2pMatrix,
    PciDevice,
    RoceGid,
    SmiGpu,
    XmlCpu,
    XmlGpu,
    XmlGraph,
    XmlNet,
    XmlNvLink,
    XmlPciDevice,
)
from ncclscope.model.inspector import (  # noqa: F401
    InspectorOp,
    InspectorReport,
    InspectorSeries,
    InspectorSetup,
)
from ncclscope.model.log import (  # noqa: F401
    CommRank,
    Communicator,
    Connection,
    ConnectionSummary,
    CudaError,
    DiagReport,
    EnvSetting,
    ErrorTrace,
    FrameworkEvent,
    FrameworkKind,
    GdrReport,
    Host,
    IbCompletionError,
    InitTiming,
    InterfaceUse,
    LaunchMismatch,
    NcclMessage,
    NetDevice,
    Origin,
    P2pReport,
    Process,
    ProcessExit,
    RdmaProblem,
    SocketFailure,
    SysfsUnreadable,
    VerbsFailure,
)
