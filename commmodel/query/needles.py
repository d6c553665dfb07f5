"""Literal needles of the query vocabulary: each match of a pattern of :mod:`commmodel.query.vocab`
contains at least one of its needles as written, so a query holding none of them cannot match it and the
scanner skips compiling and running that pattern (issue 17: ~60 of the ~90 patterns a query meets).

Derived from each pattern's parse tree (``re._parser``) by tests/test_query_needles.py, which also checks that
every vocabulary pattern is listed here with exactly the derived needles; a pattern missing here is always
scanned. ``PHRASE_NEEDLES`` does the same for the readers' own phrase patterns (parse.py, hardware_words.py:
"batch 1024", "2 nodes", "8x NDR"), keyed by the pattern as the scanner receives it; the test records them by
parsing one query and checks the table is exactly theirs. Regenerate after editing the vocabulary or a reader:
``python tests/test_query_needles.py``.
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
    'sends?|receives?|recv': ('receive', 'recv', 'send'),
    'broadcasts?|bcast': ('cast', 'roadcast'),
    'barriers?': ('barrier',),
    'reduces?': ('reduce',),
    'gathers?': ('gather',),
    'scatters?': ('scatter',),
    # DTYPES
    'bf16|bfloat16': ('bf',),
    'fp16|float16|half precision': ('float16', 'fp16', 'half precision'),
    'fp8[ -]?blockwise|block[ -]?wise[ -]fp8': ('block', 'blockwise'),
    'fp8[ -]?(?:cs|current(?:[ -]scaling)?|tensorwise)': ('fp8',),
    'fp8[ -]?row[ -]?wise|row[ -]?wise[ -]fp8': ('wise',),
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
    'megatron(?:[ -]?lm)?(?![ -]?turing)': ('megatron',),
    # RECOMPUTE_WORDS
    '(?:full|complete)[ -]?(?:activation[ -])?(?:recompute|recomputation|checkpointing)': ('checkpointing', 'recomputation', 'recompute'),
    'selective[ -]?(?:activation[ -])?(?:recompute|recomputation|checkpointing)': ('selective',),
    '(?:no|without)[ -]?(?:activation[ -])?(?:recompute|recomputation|checkpointing)': ('checkpointing', 'recomputation', 'recompute'),
    '(?:activation|gradient)[ -]?(?:checkpointing|recomputation|recompute)': ('checkpointing', 'recomputation', 'recompute'),
    # ALGORITHM_WORDS
    'nvls[ -]?tree|nvlink[ -]?sharp[ -]?tree': ('sharp', 'tree'),
    'nvls|nvlink[ -]?sharp': ('nvl',),
    '(?:in[ -]network[ -]|ib[ -])?sharp|collnet': ('collnet', 'sharp'),
    'hierarchical[ -]tree': ('hierarchical',),
    'hierarchical': ('hierarchical',),
    'recursive[ -]doubling': ('recursive',),
    'recursive[ -]halving': ('recursive',),
    'rabenseifner': ('rabenseifner',),
    'bruck': ('bruck',),
    'binomial(?:[ -]tree)?': ('binomial',),
    '(?:double[ -]binary[ -])?tree': ('tree',),
    'ring': ('ring',),
    'pairwise': ('pairwise',),
    'parameter[ -]server': ('parameter',),
    'dissemination': ('dissemination',),
    # ATTENTION_WORDS
    '(?:no|without|unfused)[ -]?(?:flash[ -]?|fused[ -]?)?(?:attention|attn)': ('att',),
    '(?:flash|fused)[ -]?(?:attention|attn)(?:[ -]?[23])?|flashattention(?:[ -]?[23])?|fa[23]': ('f',),
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
    '(?:no|without)[ -]nvlink': ('nvlink',),
    'nvlink|nvswitch|nvl(?:36|72)?': ('nv',),
    'pci[ -]?e(?:[ -]?(?:gen)?[ -]?[3-6])?': ('pci',),
    # PROVIDERS
    'azure|microsoft azure': ('azure', 'microsoft azure'),
    'aws|amazon(?: web services)?|ec2': ('amazon', 'aws', 'ec2'),
    'gcp|google cloud(?: platform)?|google': ('cp', 'oogle', 'oogle cloud'),
    'oci|oracle(?: cloud)?': ('ci', 'racle'),
}
"""Vocabulary pattern -> literals, one of which every match contains."""

PHRASE_NEEDLES: dict[str, tuple[str, ...]] = {
    '(?<![a-z0-9.])(?:(\\d{1,3}(?:,\\d{3})+|\\d+(?:\\.\\d+)?)[ -]?(?:(?:dgx|hgx)s?(?:[ -]?(?:nodes?|boxes|box|servers?|machines?|hosts?|instances?))?|(?:nodes?|boxes|box|servers?|machines?|hosts?|instances?))[ ]?(?:of|with|x|×|each with)[ ]?(\\d{1,3}(?:,\\d{3})+|\\d+(?:\\.\\d+)?)[ ]?(?:x[ ]?)?(?:(?P<fam>(?:(?:gb300)|(?:b300)|(?:gb200)|(?:gh200)|(?:b200)|(?:h200)|(?:h100)|(?:h800)|(?:a100)|(?:v100)|(?:(?:rtx[ -]?)?2080[ -]?ti)|(?:(?:rtx[ -]?)?4090)|(?:l40s)|(?:(?:amd[ -]?)?(?:instinct[ -]?)?mi300x?)|(?:(?:amd[ -]?)?(?:instinct[ -]?)?mi325x?)|(?:(?:amd[ -]?)?(?:instinct[ -]?)?mi355x?)))(?:[ -]?(?P<mem1>\\d{2,3})[ -]?gb(?![ ]?/[ ]?s|ps|it))?(?:[ -]?(?P<form>sxm\\d?|pcie|nvl))?(?:[ -]?(?P<mem2>\\d{2,3})[ -]?gb(?![ ]?/[ ]?s|ps|it))?s?(?:[ -]?gpus?)?|gpus?))(?![a-z0-9])':
        ('box', 'boxes', 'dgx', 'hgx', 'host', 'instance', 'machine', 'node', 'server'),
    '(?<![a-z0-9.])(?:(?:(\\d{1,3}(?:,\\d{3})+|\\d+(?:\\.\\d+)?)|(?:an?[ ]|one[ ])?(single|one|two|three|four|five|six|seven|eight|nine|ten|twelve|sixteen|twenty[ -]four|thirty[ -]two|forty[ -]eight|sixty[ -]four))[ ]?(?:x[ ]?)?(?P<fam>(?:(?:gb300)|(?:b300)|(?:gb200)|(?:gh200)|(?:b200)|(?:h200)|(?:h100)|(?:h800)|(?:a100)|(?:v100)|(?:(?:rtx[ -]?)?2080[ -]?ti)|(?:(?:rtx[ -]?)?4090)|(?:l40s)|(?:(?:amd[ -]?)?(?:instinct[ -]?)?mi300x?)|(?:(?:amd[ -]?)?(?:instinct[ -]?)?mi325x?)|(?:(?:amd[ -]?)?(?:instinct[ -]?)?mi355x?)))(?:[ -]?(?P<mem1>\\d{2,3})[ -]?gb(?![ ]?/[ ]?s|ps|it))?(?:[ -]?(?P<form>sxm\\d?|pcie|nvl))?(?:[ -]?(?P<mem2>\\d{2,3})[ -]?gb(?![ ]?/[ ]?s|ps|it))?s?(?:[ -]?gpus?)?[ ]?(?:nodes?|boxes|box|servers?|machines?|hosts?|instances?))(?![a-z0-9])':
        ('2080', '4090', 'a100', 'b200', 'b300', 'gb200', 'gb300', 'gh200', 'h100', 'h200', 'h800', 'l40s', 'mi300', 'mi325', 'mi355', 'v100'),
    '(?<![a-z0-9.])(?:(\\d{1,3}(?:,\\d{3})+|\\d+(?:\\.\\d+)?)[ ]?(?:x[ ]?)?(?:(?P<fam>(?:(?:gb300)|(?:b300)|(?:gb200)|(?:gh200)|(?:b200)|(?:h200)|(?:h100)|(?:h800)|(?:a100)|(?:v100)|(?:(?:rtx[ -]?)?2080[ -]?ti)|(?:(?:rtx[ -]?)?4090)|(?:l40s)|(?:(?:amd[ -]?)?(?:instinct[ -]?)?mi300x?)|(?:(?:amd[ -]?)?(?:instinct[ -]?)?mi325x?)|(?:(?:amd[ -]?)?(?:instinct[ -]?)?mi355x?)))(?:[ -]?(?P<mem1>\\d{2,3})[ -]?gb(?![ ]?/[ ]?s|ps|it))?(?:[ -]?(?P<form>sxm\\d?|pcie|nvl))?(?:[ -]?(?P<mem2>\\d{2,3})[ -]?gb(?![ ]?/[ ]?s|ps|it))?s?(?:[ -]?gpus?)?|gpus?)?[ ]?(?:per|/|a|each|in each|in a)[ ]?(?:node|box|server|machine|host))(?![a-z0-9])':
        ('box', 'host', 'machine', 'node', 'server'),
    '(?<![a-z0-9.])(?:(\\d{1,3}(?:,\\d{3})+|\\d+(?:\\.\\d+)?)(?P<k>k)?[ ]?(?:x|×|\\*)?[ ]?(?P<fam>(?:(?:gb300)|(?:b300)|(?:gb200)|(?:gh200)|(?:b200)|(?:h200)|(?:h100)|(?:h800)|(?:a100)|(?:v100)|(?:(?:rtx[ -]?)?2080[ -]?ti)|(?:(?:rtx[ -]?)?4090)|(?:l40s)|(?:(?:amd[ -]?)?(?:instinct[ -]?)?mi300x?)|(?:(?:amd[ -]?)?(?:instinct[ -]?)?mi325x?)|(?:(?:amd[ -]?)?(?:instinct[ -]?)?mi355x?)))(?:[ -]?(?P<mem1>\\d{2,3})[ -]?gb(?![ ]?/[ ]?s|ps|it))?(?:[ -]?(?P<form>sxm\\d?|pcie|nvl))?(?:[ -]?(?P<mem2>\\d{2,3})[ -]?gb(?![ ]?/[ ]?s|ps|it))?s?(?:[ -]?gpus?)?)(?![a-z0-9])':
        ('2080', '4090', 'a100', 'b200', 'b300', 'gb200', 'gb300', 'gh200', 'h100', 'h200', 'h800', 'l40s', 'mi300', 'mi325', 'mi355', 'v100'),
    '(?<![a-z0-9.])(?:(?P<fam>(?:(?:gb300)|(?:b300)|(?:gb200)|(?:gh200)|(?:b200)|(?:h200)|(?:h100)|(?:h800)|(?:a100)|(?:v100)|(?:(?:rtx[ -]?)?2080[ -]?ti)|(?:(?:rtx[ -]?)?4090)|(?:l40s)|(?:(?:amd[ -]?)?(?:instinct[ -]?)?mi300x?)|(?:(?:amd[ -]?)?(?:instinct[ -]?)?mi325x?)|(?:(?:amd[ -]?)?(?:instinct[ -]?)?mi355x?)))(?:[ -]?(?P<mem1>\\d{2,3})[ -]?gb(?![ ]?/[ ]?s|ps|it))?(?:[ -]?(?P<form>sxm\\d?|pcie|nvl))?(?:[ -]?(?P<mem2>\\d{2,3})[ -]?gb(?![ ]?/[ ]?s|ps|it))?s?(?:[ -]?gpus?)?[ ]?(?:x|×)[ ]?(?P<count>\\d+))(?![a-z0-9])':
        ('2080', '4090', 'a100', 'b200', 'b300', 'gb200', 'gb300', 'gh200', 'h100', 'h200', 'h800', 'l40s', 'mi300', 'mi325', 'mi355', 'v100'),
    '(?<![a-z0-9.])(?:(\\d{1,3}(?:,\\d{3})+|\\d+(?:\\.\\d+)?)(?P<k>k)?[ ]?(?:x[ ]?)?(?:gpus?|ranks?|processes))(?![a-z0-9])':
        ('gpu', 'processes', 'rank'),
    '(?<![a-z0-9.])(?:(?:an?[ ]|one[ ])?(single|one|two|three|four|five|six|seven|eight|nine|ten|twelve|sixteen|twenty[ -]four|thirty[ -]two|forty[ -]eight|sixty[ -]four)[ ]?(?:(?P<fam>(?:(?:gb300)|(?:b300)|(?:gb200)|(?:gh200)|(?:b200)|(?:h200)|(?:h100)|(?:h800)|(?:a100)|(?:v100)|(?:(?:rtx[ -]?)?2080[ -]?ti)|(?:(?:rtx[ -]?)?4090)|(?:l40s)|(?:(?:amd[ -]?)?(?:instinct[ -]?)?mi300x?)|(?:(?:amd[ -]?)?(?:instinct[ -]?)?mi325x?)|(?:(?:amd[ -]?)?(?:instinct[ -]?)?mi355x?)))(?:[ -]?(?P<mem1>\\d{2,3})[ -]?gb(?![ ]?/[ ]?s|ps|it))?(?:[ -]?(?P<form>sxm\\d?|pcie|nvl))?(?:[ -]?(?P<mem2>\\d{2,3})[ -]?gb(?![ ]?/[ ]?s|ps|it))?s?(?:[ -]?gpus?)?|gpus?|ranks?|processes))(?![a-z0-9])':
        ('eight', 'five', 'forty', 'four', 'nine', 'one', 'seven', 'single', 'six', 'sixteen', 'sixty', 'ten', 'thirty', 'three', 'twelve', 'twenty', 'two'),
    '(?<![a-z0-9.])(?:(?:(\\d{1,3}(?:,\\d{3})+|\\d+(?:\\.\\d+)?)|(?:an?[ ]|one[ ])?(single|one|two|three|four|five|six|seven|eight|nine|ten|twelve|sixteen|twenty[ -]four|thirty[ -]two|forty[ -]eight|sixty[ -]four))[ -]*(?:(?:dgx|hgx)s?(?:[ -]?(?:nodes?|boxes|box|servers?|machines?|hosts?|instances?))?|(?:nodes?|boxes|box|servers?|machines?|hosts?|instances?)))(?![a-z0-9])':
        ('box', 'boxes', 'dgx', 'hgx', 'host', 'instance', 'machine', 'node', 'server'),
    '(?<![a-z0-9.])(?:(?P<fam>(?:(?:gb300)|(?:b300)|(?:gb200)|(?:gh200)|(?:b200)|(?:h200)|(?:h100)|(?:h800)|(?:a100)|(?:v100)|(?:(?:rtx[ -]?)?2080[ -]?ti)|(?:(?:rtx[ -]?)?4090)|(?:l40s)|(?:(?:amd[ -]?)?(?:instinct[ -]?)?mi300x?)|(?:(?:amd[ -]?)?(?:instinct[ -]?)?mi325x?)|(?:(?:amd[ -]?)?(?:instinct[ -]?)?mi355x?)))(?:[ -]?(?P<mem1>\\d{2,3})[ -]?gb(?![ ]?/[ ]?s|ps|it))?(?:[ -]?(?P<form>sxm\\d?|pcie|nvl))?(?:[ -]?(?P<mem2>\\d{2,3})[ -]?gb(?![ ]?/[ ]?s|ps|it))?s?(?:[ -]?gpus?)?)(?![a-z0-9])':
        ('2080', '4090', 'a100', 'b200', 'b300', 'gb200', 'gb300', 'gh200', 'h100', 'h200', 'h800', 'l40s', 'mi300', 'mi325', 'mi355', 'v100'),
    '(?<![a-z0-9.])(?:(?:(\\d+(?:\\.\\d+)?)[ ]?(?:x|×|times)[ ]?(?:more|as many)|(double|twice|triple|quadruple)(?:[ ]?(?:the|as many|our|my))?)[ ]?(?:nics?|hcas?|rails?|network cards?))(?![a-z0-9])':
        ('as many', 'double', 'more', 'quadruple', 'triple', 'twice'),
    '(?<![a-z0-9.])(?:(?:(?P<nics>\\d{1,3})[ ]?[x×][ ]?)?(?:(?:100|200|400|800)(?:[ ]?(?:gbit/s|gb/s|gbps|gbit|gig|gb|g))?[ -]?)?(?:(?:infiniband|ib)[ -]?)?(?P<gen>edr|hdr|ndr|xdr)(?:[ -]?(?:100|200|400|800)(?:[ ]?(?:gbit/s|gb/s|gbps|gbit|gig|gb|g))?)?(?:[ -]?(?:infiniband|ib))?)(?![a-z0-9])':
        ('edr', 'hdr', 'ndr', 'xdr'),
    '(?<![a-z0-9.])(?:(?:(?P<nics>\\d{1,3})[ ]?[x×][ ]?)?(?:(?P<rate>\\d{2,3})[ -]?(?:(?:gbit/s|gb/s|gbps|gbit|gig|gb|g)[ -]?)?(?:ethernet|eth|gbe|gige)|(?P<rate2>\\d{2,3})ge|(?:ethernet|eth)[ -]?(?P<rate3>\\d{2,3})[ -]?(?:gbit/s|gb/s|gbps|gbit|gig|gb|g)?))(?![a-z0-9])':
        ('eth', 'ethernet', 'gbe', 'ge', 'gige'),
    '(?<![a-z0-9.])(?:(?:(?P<nics>\\d{1,3})[ ]?[x×][ ]?)?(?:(?P<rate>\\d{3})[ -]?(?:(?:gbit/s|gb/s|gbps|gbit|gig|gb|g)[ -]?)?roce(?:[ -]?v2)?|roce(?:[ -]?v2)?[ -]?(?P<rate2>\\d{3})[ -]?(?:gbit/s|gb/s|gbps|gbit|gig|gb|g)?))(?![a-z0-9])':
        ('roce',),
    '(?<![a-z0-9.])(?:(?:(?P<nics>\\d{1,3})[ ]?[x×][ ]?)?(?P<rate>\\d+(?:\\.\\d+)?)[ ]?(?P<unit>gbps|gb/s|gbit/s|gbit|tbps|tb/s|g))(?![a-z0-9])':
        ('g', 'gb/s', 'gbit', 'gbit/s', 'gbps', 'tb/s', 'tbps'),
    '(?<![a-z0-9.])(?:(\\d{1,3})[ ]*(?:x[ ]*)?(?:nics?|hcas?|rails?|network cards?|ports?)(?:[ ]?per[ ]?node)?)(?![a-z0-9])':
        ('hca', 'network card', 'nic', 'port', 'rail'),
    '(?<![a-z0-9.])(?:(\\d{1,3}(?:,\\d{3})+|\\d+(?:\\.\\d+)?)[ ]?(?P<unit>[kmgtp]i?b|bytes?|[kmgtp]i?bytes?))(?![a-z0-9])':
        ('b', 'byte'),
    '(?<![a-z0-9.])(?:(?:seq(?:uence)?[ _-]?(?:len(?:gth)?)?|context(?:[ -](?:length|window))?|ctx)[ ]?(?:=|:|of|is)?[ ]?(\\d+)[ ]?(k)?)(?![a-z0-9])':
        ('context', 'ctx', 'seq'),
    '(?<![a-z0-9.])(?:(\\d+)[ ]?(k)?[ -]?(?:tokens?[ ]?)?(?:context|ctx|seq(?:uence)?(?:[ -]?len(?:gth)?)?)(?:[ -]?window)?)(?![a-z0-9])':
        ('context', 'ctx', 'seq'),
    '(?<![a-z0-9.])(?:(\\d+)[ ]?(k)?[ -]?tokens?[ ]?(?:long[ ]?)?(?:sequences?|samples?))(?![a-z0-9])':
        ('token',),
    '(?<![a-z0-9.])(?:(?:sequences?|samples?)[ ]?of[ ]?(\\d+)[ ]?(k)?[ ]?tokens?)(?![a-z0-9])':
        ('token',),
    '(?<![a-z0-9.])(?:sequences?[ ]?of[ ]?(\\d+)[ ]?(k)\\b)(?![a-z0-9])':
        ('sequence',),
    '(?<![a-z0-9.])(?:(?<![\\w.])at[ ](\\d+)[ ]?(k)\\b(?![ ]?(?:tokens?|gpus?|nodes?|steps?|gb|tb|[a-z]+\\d)))(?![a-z0-9])':
        ('at ',),
    '(?<![a-z0-9.])(?:(?:micro[ -]?batch(?:[ -]?size)?|mbs)[ ]?(?:=|:|of|is)?[ ]?(\\d+)[ ]?(k|m)?)(?![a-z0-9])':
        ('batch', 'bs'),
    '(?<![a-z0-9.])(?:(?:global[ -]?)?batch(?:[ -]?size)?[ ]?(?:=|:|of|is)?[ ]?(\\d+(?:\\.\\d+)?)[ ]?(k|m)?[ ]?tokens|(\\d+(?:\\.\\d+)?)[ ]?(k|m)?[ -]?tokens?[ ]?(?:global[ -]?)?batch(?:[ -]?size)?)(?![a-z0-9])':
        ('token', 'tokens'),
    '(?<![a-z0-9.])(?:(\\d+(?:\\.\\d+)?)[ ]?(k|m)?[ -]?tokens?[ ]?(?:/|per|each|an?)[ ]?(?:step|batch|iteration|iter))(?![a-z0-9])':
        ('token',),
    '(?<![a-z0-9.])(?:gbs[ ]?(?:=|:|of|is)?[ ]?(\\d+(?:\\.\\d+)?)[ ]?(k|m)?[ ]?tokens)(?![a-z0-9])':
        ('tokens',),
    '(?<![a-z0-9.])(?:(\\d+(?:\\.\\d+)?)[ ]?(k|m|b|t|thousand|million|billion|trillion)[ ]?tokens)(?![a-z0-9])':
        ('tokens',),
    '(?<![a-z0-9.])(?:(?:global[ -]?batch(?:[ -]?size)?|batch(?:[ -]?size)?|gbs|bs)[ ]?(?:=|:|of|is)?[ ]?(\\d[\\d,]*)[ ]?(k|m)?)(?![a-z0-9])':
        ('batch', 'bs', 'gbs', 'global'),
    '(?<![a-z0-9.])(?:(\\d[\\d,]*)[ ]?(k|m)?[ ]?(?:sequences?|samples?)(?:[ ]?per[ ]?(?:step|batch|iteration))?)(?![a-z0-9])':
        ('ample', 'equence'),
    '(?<![a-z0-9.])(?:(?:gradient|grad)[ -]?(?:accumulation|accum|acc)(?:[ -]?steps?)?[ ]?(?:=|:|of|is)?[ ]?(\\d+)|(\\d+)[ ]?(?:gradient|grad)[ -]?(?:accumulation|accum)(?:[ -]?steps?)?)(?![a-z0-9])':
        ('accum', 'grad'),
    '(?<![a-z0-9.])(?:(?:tp|tensor[ -]parallel(?:ism)?)[ ]?(?:=|:|of|is)?[ ]?(\\d+))(?![a-z0-9])':
        ('t',),
    '(?<![a-z0-9.])(?:(?:pp|pipeline[ -]parallel(?:ism)?)[ ]?(?:=|:|of|is)?[ ]?(\\d+))(?![a-z0-9])':
        ('p',),
    '(?<![a-z0-9.])(?:(?:cp|context[ -]parallel(?:ism)?)[ ]?(?:=|:|of|is)?[ ]?(\\d+))(?![a-z0-9])':
        ('c',),
    '(?<![a-z0-9.])(?:(?:ep|expert[ -]parallel(?:ism)?)[ ]?(?:=|:|of|is)?[ ]?(\\d+))(?![a-z0-9])':
        ('e',),
    '(?<![a-z0-9.])(?:zero[ -]?(?:stage[ ]?)?([0-3]))(?![a-z0-9])':
        ('zero',),
    '(?<![a-z0-9.])(?:(?:no|without)[ -]sequence[ -]parallel(?:ism)?)(?![a-z0-9])':
        ('sequence',),
    '(?<![a-z0-9.])(?:sequence[ -]parallel(?:ism)?|sp)(?![a-z0-9])':
        ('s',),
    '(?<![a-z0-9.])(?:(?P<fam>(?:(?:gpt[ -]?neo[ -]?x)|(?:gpt[ -]?j)|(?:gpt[ -]?3(?![\\d.])(?![kmbt](?![a-z])))|(?:gpt[ -]?2(?![\\d.])(?![kmbt](?![a-z])))|(?:gpt)|(?:llama[ -]?3(?:\\.[0-9])?(?![\\d.])(?![kmbt](?![a-z])))|(?:llama[ -]?2(?![\\d.])(?![kmbt](?![a-z])))|(?:llama)|(?:bloom)|(?:mt[ -]?nlg|megatron[ -]turing(?:[ -]nlg)?)|(?:opt)|(?:falcon)|(?:mistral)|(?:mixtral)|(?:palm)|(?:chinchilla)|(?:gopher)|(?:qwen[ -]?[0-9.]*)|(?:deep[ -]?seek)|(?:gemma[ -]?[0-9]?)|(?:moe|mixture[ -]of[ -]experts)))(?:[ -]?(?:(?:(?P<experts>\\d+)x)?(?P<size>\\d+(?:\\.\\d+)?)[ ]?(?P<suffix>[kmbt]|million|billion|trillion)(?:[ -]?(?:params?|parameters?))?))?)(?![a-z0-9])':
        ('bloom', 'chinchilla', 'deep', 'egatron', 'experts', 'falcon', 'gemma', 'gopher', 'gpt', 'llama', 'mistral', 'mixtral', 'nlg', 'oe', 'opt', 'palm', 'qwen'),
}
"""The readers' own phrase patterns (as passed to the scanner, bounded) -> literals, one of which every match
contains; the scanner looks a pattern up here when its caller gives no needles."""
