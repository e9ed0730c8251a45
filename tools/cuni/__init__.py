"""The Cu-Ni EAM-surrogate potential: training data from LAMMPS (structures, plan, lammps_eam,
dataset, extxyz), training with mace-torch (training) and held-out errors (evaluate)."""
