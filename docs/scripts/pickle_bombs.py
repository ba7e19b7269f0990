#!/usr/bin/env python3
"""Writes the pickle bombs of docs/RELIABILITY.md ("Pickles: nothing
dropped, cost follows the file") into the current directory: torch.save
zips whose data.pkl shares one value many times. Standard library only."""
import zipfile, struct
def S(s): b=s.encode(); return b'X'+struct.pack('<I',len(b))+b
def I(n): return b'J'+struct.pack('<i',n)
def G(m,n): return ('c%s\n%s\n'%(m,n)).encode()
def T(*xs): return b'('+b''.join(xs)+b't'
def tensor():
    pid=T(S('storage'),G('torch','FloatStorage'),S('0'),S('cpu'),I(4))
    return G('torch._utils','_rebuild_tensor_v2')+T(pid+b'Q',I(0),T(I(4)),T(I(1)),b'\x89',G('collections','OrderedDict')+b')R')+b'R'
def fan(v,n): return v+b'2\x86'*n
def z(name,pkl,storage=True):
    with zipfile.ZipFile(name,'w',zipfile.ZIP_STORED) as zf:
        zf.writestr('archive/data.pkl',pkl)
        if storage: zf.writestr('archive/data/0',b'\0'*16)
        zf.writestr('archive/version','3\n')
P=b'\x80\x02'
z('fanout_tensor.pt', P+fan(tensor(),19)+b'.')
z('fanout_long_key.pt', P+b'}('+S('k'*(60<<10))+fan(tensor(),19)+b'u.')
z('meta_string.pt', P+b']('+S('m'*(1<<20))+b'2'*9999+b'e.', False)
z('shared_key.pt', P+b'](}'+S('k'*(15<<20))+b'q\x00K\x01s'+b'}h\x00K\x01s'*1999+b'e.', False)
z('copy_list.pt', P+G('builtins','list')+b'q\x01]q\x00('+b'N'*100000+b'e0'+b'h\x01h\x00\x85R0'*100000+b'N.', False)
