"""ArcticDB: an embedded library over LMDB in the run's working directory (see README.md)."""

import warnings

# ArcticDB 6.28 builds each DataFrame it reads from pandas' internal block manager, which pandas
# 2.3 answers with a DeprecationWarning per read: hundreds of lines in a run's output, none ours.
warnings.filterwarnings("ignore", message="Passing a BlockManager", category=DeprecationWarning)
