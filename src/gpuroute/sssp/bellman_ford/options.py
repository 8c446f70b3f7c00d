"""Options records of the Bellman-Ford family, shared by the CPU twins (``cpu.py``) and the GPU
launchers (``gpu.py``): Harish & Narayanan's conventional method, selection and adaptive thread creation
("Accelerating SSSP Algorithm on GPU with Adaptive Thread Creation", Alg. 1-6)."""
from __future__ import annotations

from ... import config
from ..common import Option, Spec

#: Kinds of an adaptive phase (``fa_step`` in fused.cu and ``adaptive_one`` in cpu.py).
KIND_SCAN, KIND_SCAN_BUILD, KIND_QUEUE = 0, 1, 2
#: The paper's down/up ratio (330/350 us on its Tesla K20c).
DOWN_UP_RATIO = 330.0 / 350.0

CONVENTIONAL = Spec(
    "conventional",
    options=(
        Option("mode", "fused", "GPU loop: 'fused' (one kernel per phase, UPDATE fused into RELAX), 'graph' "
                                "(the paper's two kernels per phase in CUDA-graph replays) or 'host' (the "
                                "paper's own loop: a launch pair and a flag read per phase)", gpu_only=True),
        Option("nodes_per_thread", None, "fused step: 1 or 4 nodes per thread (default "
                                         "config.SSSP_FUSED_NODES_PER_THREAD)", gpu_only=True),
        Option("chase", None, "fused step: hops followed at once after improving a head (default "
                              "config.SSSP_FUSED_CHASE_DEPTH)", gpu_only=True),
        Option("pipelined", None, "fused step: queue the next CUDA-graph replay before checking the last "
                                  "(default config.SSSP_FUSED_PIPELINED)", gpu_only=True),
    ),
    params=("mode", "nodes_per_thread", "chase"),
    doc="Harish & Narayanan Bellman-Ford, Adaptive Thread Creation paper, Alg. 1-3",
)



def conventional_params(opts):
    """The conventional method's options with defaults from ``config`` (both twins report these).

    Raises
    ------
    ValueError
        An unknown mode, ``nodes_per_thread`` not 1 or 4, or a negative ``chase``.
    """
    mode = opts["mode"]
    if mode not in ("fused", "graph", "host"):
        raise ValueError(f"mode must be 'fused', 'graph' or 'host', got {mode!r}")
    npt = config.SSSP_FUSED_NODES_PER_THREAD if opts["nodes_per_thread"] is None else int(opts["nodes_per_thread"])
    if npt not in (1, 4):
        raise ValueError(f"nodes_per_thread must be 1 or 4, got {npt}")
    chase = config.SSSP_FUSED_CHASE_DEPTH if opts["chase"] is None else int(opts["chase"])
    if chase < 0:
        raise ValueError(f"chase must be >= 0, got {chase}")
    return {"mode": mode, "nodes_per_thread": npt, "chase": chase}


SELECTION = Spec("selection", doc="updated-node threads with a duplicate-free queue, Adaptive Thread Creation paper, Alg. 5-6")

ADAPTIVE = Spec(
    "adaptive",
    options=(
        Option("frac", None, "count switch: a phase builds the next phase's queue when the phase before "
                             "processed fewer than frac x n nodes (None: calibrated; 0 = never, 1 = always)"),
        Option("up_us", None, "time switch: leave the queue regime when the mean of the last two phase "
                              "times exceeds this (us; None: calibrated)"),
        Option("down_us", None, "time switch: enter the queue regime when it drops below this (us)"),
        Option("pipelined", None, "GPU: queue the next CUDA-graph replay before checking the last",
               gpu_only=True),
    ),
    variants=(None, "count", "time", "time-host"),
    params=("switch", "frac", "up_us", "down_us", "t_all_us", "t_queue_us"),
    extra=("modes", "queue_phases"),
    doc="adaptive thread creation (Adaptive Thread Creation paper, Alg. 4): switch on the frontier counted on "
        "the device ('count'), on phase times measured on the device ('time'), or on host-timed phases as the "
        "paper runs it ('time-host')",
)


def adaptive_params(opts, variant, n, t_all_us=None, t_queue_us=None):
    """Resolve the adaptive switch from the options and the calibration (both twins).

    Parameters
    ----------
    opts : dict
        ``ADAPTIVE.parse(...)`` output.
    variant : {None, "count", "time", "time-host"}
        None: ``config.SSSP_ADAPTIVE_VARIANT``.
    n : int
    t_all_us, t_queue_us : float, optional
        Calibrated phase times on this device (all-node scan, queue phase); the queue is used only when
        a queue phase is cheaper.

    Returns
    -------
    dict with the keys of ``ADAPTIVE.params``.

    Raises
    ------
    TypeError
        An option of the other switch (``frac`` with a time variant, ``up_us``/``down_us`` with count).
    ValueError
        ``frac`` outside [0, 1], ``down_us > up_us`` or a negative threshold.
    """
    switch = config.SSSP_ADAPTIVE_VARIANT if variant is None else variant
    frac, up, down = opts["frac"], opts["up_us"], opts["down_us"]
    if switch == "count" and (up is not None or down is not None):
        raise TypeError("up_us=/down_us= are options of the time switch (variant='time' or 'time-host')")
    if switch != "count" and frac is not None:
        raise TypeError("frac= is an option of the count switch (variant='count')")
    queue_pays = t_all_us is None or t_queue_us is None or t_queue_us < t_all_us
    if switch == "count":
        f = (config.SSSP_ADAPTIVE_FRONTIER_FRACTION if queue_pays else 0.0) if frac is None else float(frac)
        if not 0.0 <= f <= 1.0:
            raise ValueError(f"frac must be in [0, 1], got {f}")
        return {"switch": switch, "frac": f, "up_us": None, "down_us": None, "t_all_us": t_all_us,
                "t_queue_us": t_queue_us}
    up = config.SSSP_ADAPTIVE_UP_US if up is None else up
    down = config.SSSP_ADAPTIVE_DOWN_US if down is None else down
    if up is None or down is None:
        if t_all_us is None:
            raise ValueError("the time switch needs up_us/down_us or a calibration")
        cal_up = config.SSSP_ADAPTIVE_TIME_UP_FACTOR * t_all_us if queue_pays else 0.0
        up = cal_up if up is None else up
        down = (DOWN_UP_RATIO * up if queue_pays else 0.0) if down is None else down
    if up < 0 or down < 0 or down > up:
        raise ValueError(f"need 0 <= down_us <= up_us, got up_us={up}, down_us={down}")
    return {"switch": switch, "frac": None, "up_us": float(up), "down_us": float(down), "t_all_us": t_all_us,
            "t_queue_us": t_queue_us}
