#!/bin/bash
# Cause each failure of cases.py on one GPU and keep what torch, NCCL and torchrun print:
# bash bench/capture/run.sh  ->  $OUT/capture.tar.gz (one <case>.log per case, dumps, --log-dir tree).
# The cap-* fixtures are these logs as captured (torch 2.11.0+cu130, NCCL 2.28.9, one H200).
export PYTHONUNBUFFERED=1
C=/tmp/cap; rm -rf $C; mkdir -p $C; export CAP=$C
S=$(realpath $(dirname $0))/cases.py
TR="python3 -m torch.distributed.run --standalone"
{ nvidia-smi; nvidia-smi topo -m; python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"; hostname; date -u; } > $C/env.txt 2>&1
run() { name=$1; shift; echo "== $name"; ( cd $C && timeout ${T:-120} "$@" ) > $C/$name.log 2>&1; echo "rc=$?" >> $C/$name.log; tail -3 $C/$name.log; }
NCCL_DEBUG=INFO run plain $TR --nproc_per_node=1 $S plain
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL,ENV run plain_coll $TR --nproc_per_node=1 $S plain
NCCL_DEBUG=WARN run dupgpu $TR --nproc_per_node=2 $S dupgpu
NCCL_DEBUG=INFO run dupgpu_info $TR --nproc_per_node=2 --tee 3 $S dupgpu
mkdir -p $C/logdir; run dupgpu_logdir $TR --nproc_per_node=2 --log-dir $C/logdir --redirects 3 $S dupgpu
TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_FR_DUMP_TEMP_FILE=$C/fr_timeout_ TORCH_NCCL_DEBUG_INFO_TEMP_FILE=$C/fr_timeout_ T=150 run watchdog $TR --nproc_per_node=1 $S watchdog
TORCH_NCCL_TRACE_BUFFER_SIZE=2000 run frdump $TR --nproc_per_node=1 $S frdump
run ima $TR --nproc_per_node=1 $S ima
run oom $TR --nproc_per_node=1 $S oom
NCCL_DEBUG=INFO NCCL_SOCKET_IFNAME=nosuchif0 run bad_ifname $TR --nproc_per_node=1 $S plain
NCCL_DEBUG=INFO NCCL_NET=IB run net_ib_forced $TR --nproc_per_node=1 $S plain
python3 -c "import socket,time; s=socket.socket(); s.bind(('127.0.0.1',29533)); s.listen(); time.sleep(100)" & sleep 2
T=60 run port_in_use python3 -m torch.distributed.run --nnodes=1 --nproc_per_node=1 --rdzv_backend=static --master_addr=127.0.0.1 --master_port=29533 --node_rank=0 $S plain
kill %1 2>/dev/null
ls -la $C $C/logdir
cd /tmp && tar czf ${OUT:-/tmp}/capture.tar.gz cap
