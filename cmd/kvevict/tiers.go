package main

// compare -tier: the replay across tiers, its rows and its table.

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/sim"
	"github.com/sagellm/kvevict/tier"
)

// tierColumnHelp explains the columns of compare -tier's table; -h prints
// it after columnHelp, and docs/tiers.md carries the same text.
const tierColumnHelp = `
With -tier, the table has one block per GPU capacity, and these columns (MEDIUM is
cpu or storage, one column per -tier):
  gpu blocks         the GPU's capacity (-capacity)
  strategy           the GPU's strategy; belady and belady total are Belady's MIN at
                     the GPU's capacity and at every tier's capacity together
  hit ratio          prompt blocks found on any tier / prompt blocks, to 4 decimals
                     or as many more as set the best apart (* marks it, ties all)
  gpu, MEDIUM        the blocks each tier served / prompt blocks: the GPU's prefix,
                     then the run each tier below continued it with
  prefill s          modelled seconds of every prefill: loads plus recompute
  unpaid             loads that took longer than recomputing their blocks
  MEDIUM stored      -wide: blocks written to the tier
  MEDIUM evicted     -wide: blocks the tier's strategy evicted
  MEDIUM failed      -wide: blocks offered to the tier and not stored
  MEDIUM read        -wide: bytes loaded from the tier
  MEDIUM written     -wide: bytes written to the tier
  MEDIUM w-amp       -wide: bytes written / bytes read
  compute s          -wide: the recompute's part of prefill s
  load s             -wide: the loads' part of prefill s
  block re-prefill   -wide: GPU-evicted blocks computed again / GPU-evicted blocks
`

// tierOptions are the flags of the tiers below the GPU, as compare,
// cluster and publish read them (publish has no -model or -link).
type tierOptions struct {
	specs     tierList
	write     tier.Write
	threshold int
	exclusive bool
	model     tier.Model
	links     linkList
}

// linkList is the repeatable -link flag.
type linkList map[tier.Medium]tier.Link

func (l linkList) String() string {
	var parts []string
	for _, m := range []tier.Medium{tier.CPU, tier.Storage} {
		if k, ok := l[m]; ok {
			parts = append(parts, strings.ToLower(string(m))+"="+k.String())
		}
	}
	return strings.Join(parts, " ")
}

func (l linkList) Set(v string) error {
	m, k, err := tier.ParseLink(v)
	if err != nil {
		return err
	}
	if _, dup := l[m]; dup {
		return fmt.Errorf("the %s link is given twice", strings.ToLower(string(m)))
	}
	l[m] = k
	return nil
}

// policy names the write policy and the inclusion as the flags give them:
// "write selective=2, inclusive".
func (t *tierOptions) policy() string {
	return "write " + t.writeName() + ", " + t.inclusion()
}

// writeName is the write policy as -write gives it: through,
// selective=N, back or vllm.
func (t *tierOptions) writeName() string {
	if t.write == tier.WriteSelective {
		return fmt.Sprintf("selective=%d", t.threshold)
	}
	return t.write.String()
}

// inclusion is inclusive or exclusive.
func (t *tierOptions) inclusion() string {
	if t.exclusive {
		return "exclusive"
	}
	return "inclusive"
}

// tierFlags defines -tier, -write, -inclusive and -exclusive on fs, which
// compare, cluster and publish share; compare's -write takes vllm (in
// replay mode), the others' not.
func tierFlags(fs *flag.FlagSet, t *tierOptions, write *string, inclusive *bool, compare bool) {
	tierHelp := "a tier below the GPU, `MEDIUM:BLOCKS:STRATEGY`, repeatable, top first: MEDIUM cpu or storage, BLOCKS a count or Nx the GPU's -capacity, STRATEGY any an Index takes; e.g. -tier cpu:4x:lru -tier storage:200000:s3fifo"
	if compare {
		tierHelp += "; in serve mode the tiers go below serve mode's pool"
	}
	fs.Var(&t.specs, "tier", tierHelp)
	writeHelp := "with -tier: when a lower tier gets a block: through (after every request), selective=N (from a block's Nth request) or back (when the tier above evicts it)"
	if compare {
		writeHelp = "with -tier: when a lower tier gets a block: through (after every request), selective=N (from a block's Nth request), back (when the tier above evicts it) or, in replay mode, vllm (vLLM's offloading of May 2026: one cpu tier, lru or arc, run as vLLM runs them)"
	}
	fs.StringVar(write, "write", "through", writeHelp)
	fs.BoolVar(inclusive, "inclusive", false, "with -tier: a block loaded to the GPU keeps its copy below (the default)")
	fs.BoolVar(&t.exclusive, "exclusive", false, "with -tier and -write back: each block on one tier at a time, a load moving it up")
}

// costFlags defines -model, explained by modelHelp, and -link, which
// applies when linkWhen says, on fs: what prices the tiers in time, for
// compare and cluster.
func costFlags(fs *flag.FlagSet, t *tierOptions, model *string, modelHelp, linkWhen string) {
	t.links = linkList{}
	fs.StringVar(model, "model", "llama-3-8b", modelHelp+": "+strings.Join(tier.ModelNames(), ", "))
	fs.Var(t.links, "link", linkWhen+": a tier's link to the GPU, `MEDIUM=BANDWIDTH,LATENCY` (cpu=54GB/s,10us) or MEDIUM=PRESET ("+strings.Join(tier.LinkNames(), ", ")+"), repeatable; default cpu=pcie5, storage=nvme")
}

// checkTiers checks the tier flags against each other and the rest of
// compare's, given which were set.
func checkTiers(o *options, set map[string]bool, write, model string, inclusive bool) error {
	t := &o.tiers
	if len(t.specs) == 0 && set["model"] && o.mode != "serve" {
		return usagef("-model needs -tier or -mode serve: it shapes the tiers below the GPU, or times serve mode's engine")
	}
	if len(t.specs) == 0 {
		return t.check(set, write, inclusive, o.capacities)
	}
	serve := o.mode == "serve" // whose own rules checkEngine checks, once -write is read
	switch {
	case o.sampling > 0:
		return usagef("-sampling and -tier: the tiers keep their blocks in an Index, which selects exactly")
	case o.format == "csv":
		return usagef("-format csv has no place for each tier's counts: use -format json or the table")
	case !serve && o.plot != "" && t.specs[0].times == 0 && len(o.capacities) > 1:
		return usagef("-plot with -tier draws against the size of the first tier below the GPU: give it in times the GPU's (such as -tier cpu:4x:lru) so that it changes with -capacity")
	}
	if err := t.check(set, write, inclusive, o.capacities); err != nil {
		return err
	}
	var err error
	if t.model, err = tier.LookupModel(strings.TrimSpace(model)); err != nil {
		return usagef("-model: %v", err)
	}
	return nil
}

// check checks the tier flags against each other and the GPU capacities,
// given which were set, and reads -write: the one check of every rule
// they share, for compare, cluster and publish alike.
func (t *tierOptions) check(set map[string]bool, write string, inclusive bool, capacities []int) error {
	if len(t.specs) == 0 {
		for _, name := range []string{"write", "inclusive", "exclusive", "link"} {
			if set[name] {
				return usagef("-%s needs -tier: it shapes the tiers below the GPU", name)
			}
		}
		return nil
	}
	if inclusive && t.exclusive {
		return usagef("-inclusive and -exclusive: choose one")
	}
	var err error
	if t.write, t.threshold, err = tier.ParseWrite(strings.ToLower(strings.TrimSpace(write))); err != nil {
		return usagef("-write: %v", err)
	}
	if t.exclusive && t.write != tier.WriteBack {
		return usagef("-exclusive needs -write back: %s writes copy blocks down on purpose", t.write)
	}
	if err := checkTierOrder(t.specs); err != nil {
		return usagef("%v", err)
	}
	for i, s := range t.specs {
		for _, above := range t.specs[:i] {
			if above.medium == s.medium {
				return usagef("-tier %s and -tier %s: a tier is named by its medium (in -link, the columns and the KV events), so each medium is one tier", above, s)
			}
		}
	}
	for _, s := range t.specs {
		for _, c := range capacities {
			if s.capacity(c) > maxTierBlocks {
				return usagef("-tier %s beside %d GPU blocks is %d blocks, more than a tier holds (%d)", s, c, s.capacity(c), maxTierBlocks)
			}
		}
	}
	if t.write == tier.WriteVLLM && (len(t.specs) != 1 || t.specs[0].medium != tier.CPU ||
		(t.specs[0].strategy != kvevict.LRU && t.specs[0].strategy != kvevict.ARC)) {
		return usagef("-write vllm runs vLLM's offloading: one -tier cpu:BLOCKS:lru or cpu:BLOCKS:arc")
	}
	for m := range t.links {
		found := false
		for _, s := range t.specs {
			found = found || s.medium == m
		}
		if !found {
			return usagef("-link %s: no -tier on that medium", strings.ToLower(string(m)))
		}
	}
	return nil
}

// tierJobs are compare's runs with -tier, in the order of the output: per
// GPU capacity, each strategy over the tiers, then Belady's MIN at the
// GPU's capacity and at the capacity of every tier together.
func (o *options) tierJobs() []job {
	var out []job
	for _, c := range o.capacities {
		for _, s := range o.strategies {
			for h := range max(len(o.hints), 1) {
				out = append(out, job{capacity: c, strategy: s, hints: h})
			}
		}
		out = append(out, job{capacity: c}, job{capacity: c, total: true})
	}
	return out
}

// below are the tiers below a GPU of gpu blocks, as sim takes them; none
// without -tier.
func (t *tierOptions) below(gpu int) sim.Tiers {
	if len(t.specs) == 0 {
		return sim.Tiers{}
	}
	b := sim.Tiers{Write: t.write, Threshold: t.threshold, Exclusive: t.exclusive}
	for _, s := range t.specs {
		b.Below = append(b.Below, tier.Level{Medium: s.medium, Capacity: s.capacity(gpu), Strategy: s.strategy})
	}
	return b
}

// totalCapacity is the blocks of every tier beside a GPU of gpu blocks.
func (t *tierOptions) totalCapacity(gpu int) int {
	n := gpu
	for _, s := range t.specs {
		n += s.capacity(gpu)
	}
	return n
}

// runTier runs j over the tiers.
func (o *options) runTier(w *sim.Workload, cost *tier.Cost, j job, progress func(done, total int)) (tierRow, error) {
	t := &o.tiers
	cfg := sim.Config{Capacity: j.capacity, Progress: progress}
	if j.strategy == "" {
		if j.total {
			cfg.Capacity = t.totalCapacity(j.capacity)
		}
		rep, err := sim.Belady(w, cfg)
		return tierRow{TierReport: sim.TierReport{Report: rep}, GPUCapacity: j.capacity}, err
	}
	tc := sim.TierConfig{Config: cfg, Tiers: t.below(j.capacity), Cost: cost}
	if o.hinted != nil {
		w = o.hinted[j.hints]
	}
	rep, err := sim.ReplayTiers(w, j.strategy, tc)
	if o.hinted != nil {
		rep.Hints = o.hints[j.hints].String()
	}
	return tierRow{TierReport: rep, GPUCapacity: j.capacity}, err
}

// tierRow is one line of compare -tier's output.
type tierRow struct {
	Workload string `json:"workload"`
	sim.TierReport
	// GPUCapacity is the GPU's blocks: CapacityBlocks but on the row of
	// Belady at every tier's capacity.
	GPUCapacity int    `json:"gpu_capacity_blocks"`
	Model       string `json:"model"`
	Best        bool   `json:"best"`
	against
}

// compareTiers is compare with -tier.
func compareTiers(o *options, w *sim.Workload, stdout, stderr io.Writer, interrupt <-chan os.Signal, workers int) error {
	t := &o.tiers
	cost, err := tier.NewCost(t.model, w.BlockTokens, tier.DefaultCompute(), t.links)
	if err != nil {
		return usagef("%v", err)
	}
	js := o.tierJobs()
	bar := newProgress(stderr, o.format, len(js)*len(w.Requests))
	rows, finished, err := runJobs(len(js), workers, func(i int) (tierRow, error) {
		r, err := o.runTier(w, cost, js[i], bar.callback())
		bar.finished()
		return r, err
	}, interrupt)
	bar.stop()
	if err != nil && !errors.Is(err, errInterrupted) {
		return err
	}
	if err != nil { // as compare without -tier: the capacities whose runs all finished
		var left []string
		if rows, left = finishedCapacities(rows, finished, o.capacities); rows == nil {
			rows = []tierRow{} // JSON's [] when none finished
		}
		err = fmt.Errorf("%w: left out GPU capacities %s, whose runs had not all finished", err, strings.Join(left, ", "))
	}
	if werr := writeTierRows(stdout, o, w, cost, rows); werr != nil {
		return werr
	}
	if err != nil {
		return err
	}
	if o.plot != "" {
		return plotTiers(o.plot, o, w.Name, rows)
	}
	return nil
}

// writeTierRows marks each GPU capacity's best rows by -rank, sets them
// against -baseline, and writes them in -format o.format.
func writeTierRows(stdout io.Writer, o *options, w *sim.Workload, cost *tier.Cost, rows []tierRow) error {
	t := &o.tiers
	// score is what -rank maximises.
	score := func(r *tierRow) float64 { return r.HitRatio }
	if o.rank == rankPrefill {
		score = func(r *tierRow) float64 { return -r.PrefillSeconds }
	}
	best := map[int]float64{}
	for i := range rows {
		if r := &rows[i]; r.Strategy != sim.BeladyName {
			if b, ok := best[r.GPUCapacity]; !ok || score(r) > b {
				best[r.GPUCapacity] = score(r)
			}
		}
	}
	for i := range rows {
		rows[i].Workload, rows[i].Model = w.Name, t.model.Name
		rows[i].Best = rows[i].Strategy != sim.BeladyName && score(&rows[i]) == best[rows[i].GPUCapacity]
	}
	setAgainst(o.baseline, len(rows), func(i int) *sim.Report { return &rows[i].Report },
		func(i int) int { return rows[i].GPUCapacity }, func(i int) *against { return &rows[i].against })
	if o.format == "json" {
		return writeRecords(stdout, "json", rows)
	}
	return writeTierTable(stdout, o, w, cost, rows)
}

// writeTierTable prints compare -tier's table, within 100 columns unless
// -wide.
func writeTierTable(out io.Writer, o *options, w *sim.Workload, cost *tier.Cost, rs []tierRow) error {
	t := &o.tiers
	fmt.Fprintf(out, "workload %s: %d requests, %d-token blocks; mode replay across tiers\n", w.Name, len(w.Requests), w.BlockTokens)
	writeTiersLine(out, t, nil)
	fmt.Fprintf(out, "modelled seconds (docs/tiers.md): %s, %s per block, %s\n", t.model.Name,
		bytesCell(cost.BlockBytes()), computeText(cost.Compute()))
	fmt.Fprintf(out, "links to the GPU: %s\n", linksText(t, cost))
	fmt.Fprintln(out, "belady is Belady's MIN at the GPU's capacity; belady total at every tier's capacity together")

	var grid bytes.Buffer
	tw := tabwriter.NewWriter(&grid, 0, 0, 2, ' ', tabwriter.AlignRight)
	// Names align left, in a column as wide as the longest (14 at least:
	// "belady total").
	name := func(r *tierRow) string {
		n := r.Strategy
		if r.Strategy == sim.BeladyName && r.CapacityBlocks != r.GPUCapacity {
			n = "belady total"
		}
		if r.Hints != "" {
			n += " (" + r.Hints + ")"
		}
		return n
	}
	width := 14
	for i := range rs {
		width = max(width, len(name(&rs[i])))
	}
	head := []string{"gpu blocks", fmt.Sprintf("%-*s", width, "strategy"), "hit ratio", "gpu"}
	for _, s := range t.specs {
		head = append(head, strings.ToLower(string(s.medium)))
	}
	head = append(head, "prefill s", "unpaid")
	if o.wide {
		for _, s := range t.specs {
			m := strings.ToLower(string(s.medium))
			head = append(head, m+" stored", m+" evicted", m+" failed", m+" read", m+" written", m+" w-amp")
		}
		head = append(head, "compute s", "load s", "block re-prefill")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	online := tierOnline(rs)
	decimals := hitDecimals(online)
	for i := range rs {
		r := &rs[i]
		mark := " "
		if r.Best {
			mark = "*"
		}
		cells := []string{strconv.Itoa(r.GPUCapacity), fmt.Sprintf("%-*s", width, name(r)), strconv.FormatFloat(r.HitRatio, 'f', decimals, 64) + mark}
		if len(r.Tiers) == 0 { // Belady: one cache, no tiers
			for range 1 + len(t.specs) {
				cells = append(cells, "-")
			}
			cells = append(cells, "-", "-")
			if o.wide {
				for range 6*len(t.specs) + 2 {
					cells = append(cells, "-")
				}
				cells = append(cells, ratioCell(r.BlockRePrefillRate))
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
			continue
		}
		for _, ts := range r.Tiers {
			cells = append(cells, ratioCell(float64(ts.Hits)/float64(max(r.BlockRefs, 1))))
		}
		cells = append(cells, strconv.FormatFloat(r.PrefillSeconds, 'f', 1, 64), strconv.FormatInt(r.UnpaidLoads, 10))
		if o.wide {
			for _, ts := range r.Tiers[1:] {
				cells = append(cells, strconv.FormatInt(ts.StoredBlocks, 10), strconv.FormatInt(ts.EvictedBlocks, 10),
					strconv.FormatInt(ts.FailedStores, 10), bytesCell(ts.BytesRead), bytesCell(ts.BytesWritten),
					strconv.FormatFloat(ts.WriteAmplification, 'f', 2, 64))
			}
			cells = append(cells, strconv.FormatFloat(r.ComputeSeconds, 'f', 1, 64),
				strconv.FormatFloat(r.LoadSeconds, 'f', 1, 64), ratioCell(r.BlockRePrefillRate))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeBlocks(out, grid.String(), len(rs), func(i int) bool { return rs[i].GPUCapacity == rs[i-1].GPUCapacity },
		func(i int) string { return tierBestLine(rs, online, rs[i].GPUCapacity, o.rank, decimals) })
	return nil
}

// writeTiersLine writes the header line of the tiers below the GPU and,
// if cost is set, the line of their links.
func writeTiersLine(out io.Writer, t *tierOptions, cost *tier.Cost) {
	specs := make([]string, len(t.specs))
	for i, s := range t.specs {
		specs[i] = s.String()
	}
	fmt.Fprintf(out, "below the GPU: %s; %s\n", strings.Join(specs, ", "), t.policy())
	if cost != nil {
		fmt.Fprintf(out, "links to the GPU: %s\n", linksText(t, cost))
	}
}

// linksText names each tier's link to the GPU.
func linksText(t *tierOptions, cost *tier.Cost) string {
	var links []string
	for _, s := range t.specs {
		if k, ok := cost.Link(s.medium); ok {
			links = append(links, strings.ToLower(string(s.medium))+" "+k.String())
		}
	}
	return strings.Join(links, ", ")
}

// tierOnline returns the online strategies' rows of rs as compare's rows,
// each at its GPU capacity, so that the digits and the best line follow
// compare's one rule.
func tierOnline(rs []tierRow) []row {
	var out []row
	for i := range rs {
		if r := &rs[i]; r.Strategy != sim.BeladyName {
			out = append(out, row{Report: r.Report, Best: r.Best, against: r.against})
			out[len(out)-1].CapacityBlocks = r.GPUCapacity
		}
	}
	return out
}

// tierBestLine names the best strategies on the GPU at gpu blocks, by
// rank, with their margin over the next, the first set against the
// baseline; online are the online rows (tierOnline).
func tierBestLine(rs []tierRow, online []row, gpu int, rank string, decimals int) string {
	if rank != rankPrefill {
		at := onlineAt(online, gpu, byHit)
		if len(at) == 0 {
			return fmt.Sprintf("at %d GPU blocks: no online strategy", gpu)
		}
		return bestOf(at, fmt.Sprintf("best at %d GPU blocks", gpu), decimals, " (hits on any tier)"+withoutHints(online, gpu, at[0], decimals, byHit), byHit)
	}
	var names []string
	var first *tierRow
	next := math.Inf(1) // the least prefill after the best's
	for i := range rs {
		r := &rs[i]
		switch {
		case r.GPUCapacity != gpu || r.Strategy == sim.BeladyName:
		case r.Best:
			names = append(names, r.Strategy)
			if first == nil {
				first = r
			}
		default:
			next = min(next, r.PrefillSeconds)
		}
	}
	if first == nil {
		return fmt.Sprintf("at %d GPU blocks: no online strategy", gpu)
	}
	margin := ", no other online strategy run"
	if !math.IsInf(next, 1) {
		var nextNames []string
		for i := range rs {
			if r := &rs[i]; r.GPUCapacity == gpu && r.Strategy != sim.BeladyName && r.PrefillSeconds == next {
				nextNames = append(nextNames, r.Strategy)
			}
		}
		d := 1 // decimals enough that the margin prints above zero
		for d < 9 && strconv.FormatFloat(next-first.PrefillSeconds, 'f', d, 64) == strconv.FormatFloat(0, 'f', d, 64) {
			d++
		}
		margin = fmt.Sprintf(", %.*f s less than %s", d, next-first.PrefillSeconds, strategyList(nextNames))
	} else if len(names) > 1 {
		return fmt.Sprintf("best at %d GPU blocks by modelled prefill: all %d online strategies tie at %.1f s, hit ratio %.4f",
			gpu, len(names), first.PrefillSeconds, first.HitRatio) + first.line()
	}
	return fmt.Sprintf("best at %d GPU blocks by modelled prefill: %s %.1f s, hit ratio %.4f", gpu, tiedNames(names), first.PrefillSeconds, first.HitRatio) + margin + first.line()
}

// bytesCell prints a byte count in the largest binary unit of which it
// holds at least one, with up to two decimals.
func bytesCell(n int64) string {
	v, units := float64(n), []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	decimals := 2
	switch {
	case i == 0 || v >= 100:
		decimals = 0
	case v >= 10:
		decimals = 1
	}
	return strconv.FormatFloat(v, 'f', decimals, 64) + " " + units[i]
}

// computeText describes the prefill rate the seconds assume.
func computeText(c tier.Compute) string {
	if c.TokensPerSecond > 0 {
		return fmt.Sprintf("prefill at %.0f tokens/s", c.TokensPerSecond)
	}
	return fmt.Sprintf("prefill at %.0f TFLOPS x %.0f%% MFU", c.FLOPS/1e12, 100*c.MFU)
}
