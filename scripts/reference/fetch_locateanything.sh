#!/usr/bin/env bash
# Fetches LocateAnything-3B's remote code (the export in NVlabs/Eagle at 783f656d, folder
# Embodied/eaglevl/utils/locany/, and its evaluation code's answer parser) into .build/locany, where scripts/reference/*locateanything*.py
# import it as the package "locany". Nothing of it is committed: several of its files carry an
# NVIDIA "all rights reserved" header (image_processing_locateanything.py, modeling_vit.py,
# generate_utils.py, the mask utilities), so they only produce goldens.
#
#   scripts/reference/fetch_locateanything.sh [EAGLE_GIT]
#
# EAGLE_GIT is a clone of https://github.com/NVlabs/Eagle (a bare mirror will do); without it
# the script clones one (blobs on demand) into .build/eagle. The files' sha256 must equal those
# below, read at 783f656d.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
commit=783f656d127ee498137b5ff52603ce36c292d317
short=783f656d
src=${1:-}
if [ -z "$src" ]; then
    src="$root/.build/eagle"
    [ -d "$src" ] || git clone --quiet --filter=blob:none --no-checkout https://github.com/NVlabs/Eagle "$src"
fi
out="$root/.build/locany"
mkdir -p "$out"
files="configuration_locateanything.py configuration_qwen2.py generate_utils.py image_processing_locateanything.py
mask_magi_utils.py mask_sdpa_utils.py attn_mask_utils.py modeling_locateanything.py modeling_qwen2.py modeling_vit.py
processing_locateanything.py chat_template.json preprocessor_config.json processor_config.json"
for f in $files; do
    git -C "$src" show "$commit:Embodied/eaglevl/utils/locany/$f" > "$out/$f"
done
: > "$out/__init__.py"
# the evaluation code's answer parser (parse_bbox_with_labels and the conversions to pixels), which
# the served golden runs on the reference's answers
mkdir -p "$out/eval"
for f in inference_grounding_ddp.py inference_compat.py; do
    git -C "$src" show "$commit:Embodied/evaluation/$f" > "$out/eval/$f"
done
(cd "$out" && sha256sum -c --quiet) <<'SUMS'
d2738cc180add2b77e88b8cf2bc87ff012f23bd417a99150a033f61b0a8eb857  configuration_locateanything.py
1fda5efb735cae465debd414afc673389fe731afd95c934a469faa23d3d7fdf1  configuration_qwen2.py
863187051772549928bf103b58f6176263c9b786fb19ef83fd7b2e76169fa65e  generate_utils.py
5109868add766c7e244487ecfff6a6f5a4aa1497b38b385a33a969f12e23b4ec  image_processing_locateanything.py
646b565e38b30d58cafe30aeecf0283aee83d198ce8e57936c3488c1dc7b9276  mask_magi_utils.py
7e9d600eb25283963cc1696da060813066b9795da467cf9fb0ca68bfc8de1e1d  mask_sdpa_utils.py
8858e99663c44dd211545cb934a361cd967dd892367f613bc17014e7e264bc54  attn_mask_utils.py
a5ad3d2e4f0719e4964af7937ba6d63dc7a90a4448dd8dc54a56eca23c04f18d  modeling_locateanything.py
51f43ea3b8124dcbf48f63e2331a4357221ca6c605ea89a053016e25354da0e4  modeling_qwen2.py
96479eb121c840f009a32830c78740154171290419108caefcf8778580700373  modeling_vit.py
66dd1d591230787f70518c15be593243c5b41b8d8d72fa7f44e9ec635fc84ecc  processing_locateanything.py
a0cb84f5108587c8a2e944ad7d4b123bb413c34baeef30e3d6d7a3bb486a835d  chat_template.json
d3626759c8d75f3f5b2b0a03fdd168f9853bb428ba5dc027e085d6daad8eded8  preprocessor_config.json
b5588a63082eb2188016c2add5e9cca3a4cc035b95d318a42b103f3ef68be984  processor_config.json
0a08b029a2633b6293eb0428a806c08041a352e497a917fea84d32d6472c40ac  eval/inference_grounding_ddp.py
d8647b4f4710ad0977b5f19f77cda2c13ef35cc2eb21c325067b6b7407528a8a  eval/inference_compat.py
SUMS
echo "wrote $out (NVlabs/Eagle $short, $commit)"
