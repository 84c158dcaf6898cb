"""Sweeps on a Slurm cluster: a template per partition (slurm/*.yaml) -> one sbatch script per template, submitted with
`sbatch`, its results brought home from the job's folder on the shared filesystem or from its log.

    python benchmark.py yamls/70b.yaml --slurm slurm/h100-2nodes.yaml [--submit]
    python benchmark.py --collect JOBID [JOBID ...]
"""
