package installer

import "context"

// postInstall runs what follows a working cluster, in order: keeping node taints and labels
// true (issue 4) and Rancher (issue 5). Each step lives in its own file.
func (s *session) postInstall(ctx context.Context, first *hostState) error {
	for _, step := range []func(context.Context, *hostState) error{s.reconcileNodes, s.rancher} {
		if err := step(ctx, first); err != nil {
			return err
		}
	}
	return nil
}
