"""Literal needles of the query vocabulary: each match of a pattern of :mod:`commmodel.query.vocab`
contains at least one of its needles as written, so a query holding none of them cannot match it and the
scanner skips compiling and running that pattern (issue 17: ~60 of the ~90 patterns a query meets).

Derived from each pattern's parse tree (``re._parser``) by tests/test_query_needles.py, which also checks that
every vocabulary pattern is listed here with exactly the derived needles; a pattern missing here is always
scanned. Regenerate after editing the vocabulary: ``python tests/test_query_needles.py``.
"""

from __future__ import annotations

NEEDLES: dict[str, tuple[str, ...]] = {
    # WHAT_IF_WORDS
    'what[ -]if': ('what',),
    'compare(?:d)?(?: to| with)?': ('compare',),
    '\\bvs\\.?': ('vs',),
    'versus': ('versus',),
    'instead of': ('instead of',),
    'switch(?:ing|ed)?': ('switch',),
    'upgrad(?:e|ing)': ('upgrad',),
    'mov(?:e|ing)': ('mov',),
    'go(?:ing)? from': (' from',),
    # COLLECTIVES
    'all[ _-]?reduces?|allreduces?': ('reduce',),
    'all[ _-]?gathers?|allgathers?': ('gather',),
    'reduce[ _-]?scatters?|reducescatters?': ('scatter',),
    'all[ _-]?to[ _-]?alls?|alltoalls?|a2a': ('2a', 'all', 'lltoall'),
    'send[ _/-]?recv|send[ _/-]?receive|point[ -]to[ -]point|\\bp2p\\b': ('p2p', 'point', 'receive', 'send'),
    'broadcasts?|bcast': ('cast', 'roadcast'),
    'barriers?': ('barrier',),
    'reduces?': ('reduce',),
    'gathers?': ('gather',),
    'scatters?': ('scatter',),
    # DTYPES
    'bf16|bfloat16': ('bf',),
    'fp16|float16|half precision': ('float16', 'fp16', 'half precision'),
    'fp8': ('fp8',),
    'mxfp8': ('mxfp8',),
    'nvfp4': ('nvfp4',),
    'fp32|float32|full precision': ('loat32', 'p32', 'ull precision'),
    'tf32': ('tf32',),
    # STACK_WORDS
    'megatron[ -]?core|mcore|nemo': ('mcore', 'megatron', 'nemo'),
    'megatron[ -]?lm[ -]?2021': ('megatron',),
    'fsdp ?2?|torchtitan': ('fsdp', 'torchtitan'),
    'deep ?speed': ('speed',),
    'ddp|distributed ?data ?parallel': ('dp', 'istributed'),
    # RECOMPUTE_WORDS
    '(?:full|complete)[ -]?(?:activation[ -])?(?:recompute|recomputation|checkpointing)': ('checkpointing', 'recomputation', 'recompute'),
    'selective[ -]?(?:activation[ -])?(?:recompute|recomputation|checkpointing)': ('selective',),
    '(?:no|without)[ -]?(?:activation[ -])?(?:recompute|recomputation|checkpointing)': ('checkpointing', 'recomputation', 'recompute'),
    # LIBRARY_WORDS
    'open[ -]?mpi|ompi': ('mpi', 'pen'),
    'mpich': ('mpich',),
    'mpi': ('mpi',),
    'nccl': ('nccl',),
    'rccl': ('rccl',),
    'gloo': ('gloo',),
    # NETWORK_WORDS
    'efa[ -]?v?1': ('efa',),
    'efa[ -]?v?2': ('efa',),
    'efa[ -]?v?3': ('efa',),
    'efa[ -]?v?4': ('efa',),
    '(?:elastic fabric adapter|efa)': ('fa', 'lastic fabric adapter'),
    '(?:gpudirect[ -])?tcpxo': ('tcpxo',),
    '(?:gpudirect[ -])?tcpx': ('tcpx',),
    'slingshot(?:[ -]?11)?': ('slingshot',),
    'omni[ -]?path(?:[ -]?100(?:g|gb|gbps)?)?|\\bopa\\b': ('omni', 'opa'),
    'infiniband|\\bib\\b': ('ib', 'infiniband'),
    'roce(?:[ -]?v2)?': ('roce',),
    'ethernet|\\beth\\b|\\btcp\\b': ('eth', 'ethernet', 'tcp'),
    # SCALE_UP_WORDS
    '(?:no|without)[ -](?:p2p|peer[ -]to[ -]peer)': ('no', 'without'),
    'nvlink|nvswitch|nvl(?:36|72)?': ('nv',),
    'pci[ -]?e(?:[ -]?(?:gen)?[ -]?[3-6])?': ('pci',),
    # PROVIDERS
    'azure|microsoft azure': ('azure', 'microsoft azure'),
    'aws|amazon(?: web services)?|ec2': ('amazon', 'aws', 'ec2'),
    'gcp|google cloud(?: platform)?|google': ('cp', 'oogle', 'oogle cloud'),
    'oci|oracle(?: cloud)?': ('ci', 'racle'),
}
"""Vocabulary pattern -> literals, one of which every match contains."""
