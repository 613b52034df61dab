// moe.c: a mixture of experts (ml.MoE) as transformers 5.17's top-k routed MoE computes it with its
// default experts path (integrations/moe.py, grouped_mm_experts_forward). All in F32.
#include <stdlib.h>
#include <string.h>

#include "internal.h"

// better reports whether score a at expert i ranks before score b at expert j: higher first, the
// lower index on a tie (torch.topk's order for sorted=True).
static inline int better(float a, int i, float b, int j) { return a > b || (a == b && i < j); }

// top_k writes the indexes of the k best of the n scores to out, best first.
static void top_k(const float *score, int n, int k, int *out) {
    for (int s = 0; s < k; s++) {
        int best = -1;
        for (int e = 0; e < n; e++) {
            int taken = 0;
            for (int t = 0; t < s; t++) taken |= out[t] == e;
            if (!taken && (best < 0 || better(score[e], e, score[best], best))) best = e;
        }
        out[s] = best;
    }
}

// route computes one row's slots from its router logits (scores overwritten):
//   scores = router_logits.softmax(dim=-1, dtype=torch.float32)
//   group_limited_greedy: group_scores = scores.view(-1, n_group, E // n_group).max(dim=-1).values,
//     the topk_group best groups kept, scores.masked_fill(~score_mask, 0.0)
//   topk_weights, topk_indices = torch.topk(scores, k=top_k, dim=-1, sorted=False)
//   topk_weights = topk_weights * routed_scaling_factor
static void route(const kernels *kn, float *scores, const iris_moe *m, int *ids, float *w, int *scratch) {
    softmax(kn, scores, m->experts);
    if (m->groups > 1) {
        int per = m->experts / m->groups;
        float gs[256];
        for (int g = 0; g < m->groups; g++) {
            float best = scores[g * per];
            for (int e = 1; e < per; e++) best = scores[g * per + e] > best ? scores[g * per + e] : best;
            gs[g] = best;
        }
        top_k(gs, m->groups, m->topgroups, scratch);
        for (int g = 0; g < m->groups; g++) {
            int kept = 0;
            for (int t = 0; t < m->topgroups; t++) kept |= scratch[t] == g;
            if (!kept) memset(scores + g * per, 0, sizeof(float) * per);
        }
    }
    top_k(scores, m->experts, m->topk, ids);
    for (int s = 0; s < m->topk; s++) w[s] = scores[ids[s]] * m->scale;
}

static size_t elem(int dt) { return dt == DT_BF16 ? 2 : 4; }

iris_status moe_forward(pool *p, const kernels *kn, float *y, int ldy, const float *x, int ldx, const float *add, int ldadd,
                        int rows, int hidden, const iris_moe *m) {
    int E = m->experts, K = m->topk, I = m->inter;
    if (rows <= 0) return IRIS_OK;
    if (E < 1 || K < 1 || K > E || I < 1 || hidden < 1 || (m->groups > 1 && (m->groups > 256 || E % m->groups)))
        return IRIS_ERR_INVALID;
    size_t pairs = (size_t)rows * K;
    float *logits = malloc(sizeof(float) * (size_t)rows * E);
    int *ids = malloc(sizeof(int) * pairs);
    float *wts = malloc(sizeof(float) * pairs);
    int *order = malloc(sizeof(int) * pairs);   // pairs (row*K + slot) grouped by expert
    int *start = calloc((size_t)E + 1, sizeof(int));
    float *out = malloc(sizeof(float) * pairs * hidden); // each pair's expert output
    float *xg = malloc(sizeof(float) * pairs * hidden);  // the rows routed to one expert
    float *gu = malloc(sizeof(float) * pairs * 2 * I);
    int *gscratch = malloc(sizeof(int) * 256);
    iris_status st = IRIS_ERR_NOMEM;
    if (!logits || !ids || !wts || !order || !start || !out || !xg || !gu || !gscratch) goto done;

    // router_logits = F.linear(hidden_states.type(torch.float32), self.weight.type(torch.float32))
    mat rw = {DT_F32, m->router, E, hidden};
    linear_out lo = {&rw, NULL, logits, E};
    linear(p, kn, x, ldx, rows, &lo, 1);
    for (int r = 0; r < rows; r++) route(kn, logits + (size_t)r * E, m, ids + (size_t)r * K, wts + (size_t)r * K, gscratch);

    // expert_ids_g, perm = torch.sort(expert_ids): the pairs grouped by expert (a counting sort;
    // each row's result does not depend on the other rows of its group)
    for (size_t i = 0; i < pairs; i++) start[ids[i] + 1]++;
    for (int e = 0; e < E; e++) start[e + 1] += start[e];
    {
        int *fill = malloc(sizeof(int) * (size_t)E);
        if (!fill) goto done;
        memcpy(fill, start, sizeof(int) * (size_t)E);
        for (size_t i = 0; i < pairs; i++) order[fill[ids[i]]++] = (int)i;
        free(fill);
    }

    size_t es = elem(m->dt);
    for (int e = 0; e < E; e++) {
        int n = start[e + 1] - start[e];
        if (n == 0) continue;
        for (int j = 0; j < n; j++) memcpy(xg + (size_t)j * hidden, x + (size_t)(order[start[e] + j] / K) * ldx, sizeof(float) * hidden);
        // gate, up = gate_up_proj[e] products; act_fn(gate) * up; down_proj[e]
        mat wgu = {(dtype)m->dt, (const char *)m->gate_up + (size_t)e * 2 * I * hidden * es, 2 * I, hidden};
        linear_out o1 = {&wgu, NULL, gu, 2 * I};
        linear(p, kn, xg, hidden, n, &o1, 1);
        for (int j = 0; j < n; j++) silu_mul(kn, gu + (size_t)j * 2 * I, gu + (size_t)j * 2 * I + I, I);
        mat wd = {(dtype)m->dt, (const char *)m->down + (size_t)e * hidden * I * es, hidden, I};
        linear_out o2 = {&wd, NULL, xg, hidden};
        linear(p, kn, gu, 2 * I, n, &o2, 1);
        for (int j = 0; j < n; j++) memcpy(out + (size_t)order[start[e] + j] * hidden, xg + (size_t)j * hidden, sizeof(float) * hidden);
    }

    // weighted_out = proj_out * sample_weights; weighted_out.view(num_tokens, num_top_k, hidden_dim).sum(dim=1);
    // then + shared_experts(residuals)
    for (int r = 0; r < rows; r++) {
        for (int h = 0; h < hidden; h++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++) s += out[((size_t)r * K + k) * hidden + h] * wts[(size_t)r * K + k];
            y[(size_t)r * ldy + h] = add ? s + add[(size_t)r * ldadd + h] : s;
        }
    }
    st = IRIS_OK;
done:
    free(logits), free(ids), free(wts), free(order), free(start), free(out), free(xg), free(gu), free(gscratch);
    return st;
}
