from autoscaler.cli import main

raise SystemExit(main())
