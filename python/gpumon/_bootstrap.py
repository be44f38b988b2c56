# SPDX-License-Identifier: MIT
# gpumon run's bootstrap, written as the job's sitecustomize.py (embedded in the gpumon program at
# build time). A placeholder: the bootstrap itself is yet to come; until then it does nothing.
