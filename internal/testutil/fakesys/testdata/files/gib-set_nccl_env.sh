#!/bin/bash
# Stand-in for Google's /usr/local/gib/scripts/set_nccl_env.sh, which its
# gIB images install beside the plugin (/usr/local/gib/lib64). Its text is
# not public; gpuaffinity only tests that it is there.
